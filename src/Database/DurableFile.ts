/**
 * Files for `petstore backup` and `petstore restore`: put in place whole or not at all, and the one-line reasons a file
 * operation fails, as an operator reads them.
 */
import { FileSystem } from "@effect/platform"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { readFileSync } from "node:fs"
import { basename, dirname, join } from "node:path"
import { CommandFailed } from "../CommandFailed.js"

type Failure = Partial<Readonly<Record<"cause" | "code" | "message" | "name", unknown>>>

/** The first thing `pick` finds along a failure's chain of causes. */
export const findInCauses = <A>(pick: (error: Failure) => A | undefined) => (failure: unknown): A | undefined => {
  for (let error = failure, depth = 0; typeof error === "object" && error !== null && depth < 8; depth++) {
    const found = pick(error)
    if (found !== undefined) return found
    error = (error as Failure).cause
  }
  return undefined
}

/** The `code` of an error somewhere in a failure's chain of causes (`ENOSPC`, `SQLITE_FULL`). */
export const codeOf = findInCauses(({ code }) => typeof code === "string" ? code : undefined)

/** SQLite's `SQLITE_BUSY` or one of its extended codes: another connection holds the lock. */
export const isBusy = (failure: unknown): boolean => codeOf(failure)?.startsWith("SQLITE_BUSY") === true

const REASONS: Record<string, string> = {
  ENOSPC: "no space left on the device",
  EDQUOT: "the disk quota is exhausted",
  SQLITE_FULL: "no space left on the device",
  EACCES: "permission denied",
  EPERM: "permission denied",
  EROFS: "the file system is read-only",
  ENOENT: "the directory does not exist",
  ENOTDIR: "a part of the path is not a directory",
  EISDIR: "it is a directory",
  EIO: "an input/output error",
  SQLITE_NOTADB: "it is not a SQLite database",
  SQLITE_CORRUPT: "the database is damaged",
  SQLITE_CANTOPEN: "it cannot be opened"
}

/** Why a file operation or a SQLite statement failed, in a few words (`no space left on the device`). */
export const reasonOf = (failure: unknown): string => {
  const code = codeOf(failure)
  if (code !== undefined && REASONS[code] !== undefined) return REASONS[code]
  if (code?.startsWith("SQLITE_IOERR") === true) return "an input/output error"
  const message = (failure as Failure | null)?.message
  return typeof message === "string" && message !== "" ? message : String(failure)
}

/** The account name of a uid, from /etc/passwd; the bare uid when it has none (common in containers). */
export const accountOf = (uid: number): string => {
  try {
    const line = readFileSync("/etc/passwd", "utf8").split("\n").find((entry) => entry.split(":")[2] === String(uid))
    if (line !== undefined) return `${line.split(":")[0]} (uid ${uid})`
  } catch {
    // no passwd file: the uid alone
  }
  return `uid ${uid}`
}

/** The user this process runs as, for messages: `petstore (uid 10001)`. */
export const currentUser = (): string => {
  const uid = process.getuid?.()
  return uid === undefined ? "this process's user" : accountOf(uid)
}

export const exists = (path: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.exists(path).pipe(Effect.orElseSucceed(() => false)))

/** Why a file cannot be written at `target`: the directory is missing or closed to this user, or the device is full. */
export const cannotWrite = (target: string) => (error: unknown) =>
  Effect.gen(function*() {
    const directory = dirname(target)
    const code = codeOf(error)
    const reason = code === "EACCES" || code === "EPERM"
      ? `the user ${currentUser()} cannot write the directory ${directory}`
      : code === "ENOENT" && !(yield* exists(directory))
      ? `the directory ${directory} does not exist`
      : code === "ENOENT"
      ? `no file can be created in ${directory}`
      : reasonOf(error)
    return yield* new CommandFailed({ message: `cannot write ${target}: ${reason}.` })
  })

/**
 * Puts a file at `target` whole or not at all: `fill` writes it under a fresh temporary name beside `target`; the file
 * is synced, `beforeRename` runs, the file is renamed over `target` and the directory synced, so that after a crash or
 * a power cut `target` holds the old file or the new one, complete. The temporary file goes if anything fails or
 * `fill` is interrupted. It is created with `mode` (less the umask): `0o600` for a file only its owner may read.
 */
export const writeWhole = <A, E, R>(
  target: string,
  fill: (temporary: string) => Effect.Effect<A, E, R>,
  beforeRename: Effect.Effect<void, E, R> = Effect.void,
  mode = 0o666
) =>
  Effect.scoped(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const orCannotWrite = Effect.catchAll(cannotWrite(target))
    const temporary = join(dirname(target), `.${basename(target)}.${randomBytes(6).toString("hex")}.tmp`)
    yield* Effect.addFinalizer(() => Effect.ignore(fs.remove(temporary)))
    const file = yield* orCannotWrite(fs.open(temporary, { flag: "wx", mode }))
    const result = yield* fill(temporary)
    // Once filled, the file is put in place to the end: an interruption waits for it.
    yield* Effect.uninterruptible(Effect.gen(function*() {
      yield* orCannotWrite(file.sync)
      yield* beforeRename
      yield* orCannotWrite(fs.rename(temporary, target))
      yield* orCannotWrite(Effect.scoped(Effect.flatMap(fs.open(dirname(target), { flag: "r" }), (dir) => dir.sync)))
    }))
    return result
  }))

/** A size as people read it: `512 B`, `48.2 kB`, `104.9 MB`, `2.1 GB`. */
export const formatSize = (bytes: number): string => {
  const units = ["B", "kB", "MB", "GB", "TB"]
  let value = bytes
  let unit = 0
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000
    unit++
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[unit]}`
}

/** A time taken as people read it: `45 ms`, `3.1 s`. */
export const formatMillis = (millis: number): string =>
  millis < 1000 ? `${Math.round(millis)} ms` : `${(millis / 1000).toFixed(1)} s`
