/**
 * The SQLite file `DATABASE_URL` names: which file it is (a plain path, `:memory:` or a `file:` URI, read once here so
 * that every connection opens the same database), and, when it cannot be opened, why, in one line that names the
 * variable, the path, the reason and what to do (the directory is missing; the process's user cannot write it).
 */
import { Cause, Either, Layer, Schema } from "effect"
import {
  accessSync,
  closeSync,
  constants,
  openSync,
  readFileSync,
  statfsSync,
  type Stats,
  statSync,
  unlinkSync
} from "node:fs"
import { userInfo } from "node:os"
import { dirname, join, resolve } from "node:path"

export class DatabaseFileError extends Schema.TaggedError<DatabaseFileError>()("DatabaseFileError", {
  message: Schema.String
}) {}

export const IN_MEMORY = ":memory:"

/** The query parameters of a `file:` URI that are understood: `mode=memory` and `mode=rwc` (the default). */
const MODES = ["rwc", "memory"]

/**
 * The file a SQLite `DATABASE_URL` names, or `:memory:`. `file:` URIs (`file:pets.db`, `file:///data/pets.db`,
 * `file::memory:`, `?mode=memory`) are read here: SQLite as Bun opens it would take them for file names.
 */
export const sqliteFile = (url: string): Either.Either<string, DatabaseFileError> => {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(url)?.[1]
  if (scheme !== undefined && scheme.toLowerCase() !== "file") {
    // Only the scheme is shown: the rest of such a URL may hold a password.
    return Either.left(
      new DatabaseFileError({
        message:
          `DATABASE_URL is a ${scheme}:// URL, which petstore cannot use: it stores its catalogue in SQLite or ` +
          `PostgreSQL. Set DATABASE_URL to a postgres:// (or postgresql://) URL, or to a SQLite file: a path such as ` +
          `/data/petstore.db, a file: URI such as file:///data/petstore.db, or :memory:.`
      })
    )
  }
  if (!/^file:/i.test(url)) return Either.right(url)
  const refuse = (why: string) =>
    Either.left(
      new DatabaseFileError({ message: `DATABASE_URL=${url} is not a SQLite file URI petstore can open: ${why}.` })
    )
  const [beforeQuery, query = ""] = url.slice("file:".length).split("#")[0].split("?", 2)
  let path = beforeQuery
  if (path.startsWith("//")) {
    const authority = path.slice(2).split("/")[0]
    if (authority !== "" && authority !== "localhost") return refuse(`the host '${authority}' is not this machine`)
    path = path.slice(2 + authority.length)
  }
  try {
    path = decodeURIComponent(path)
  } catch {
    return refuse("its path is not valid percent-encoding")
  }
  const params = new URLSearchParams(query)
  for (const key of params.keys()) {
    if (key !== "mode") return refuse(`the parameter '${key}' is not supported (only mode=rwc or mode=memory)`)
  }
  const mode = params.get("mode") ?? "rwc"
  if (!MODES.includes(mode)) return refuse(`mode=${mode} is not supported (only mode=rwc or mode=memory)`)
  if (mode === "memory" || path === IN_MEMORY) return Either.right(IN_MEMORY)
  if (path === "") return refuse("it names no file")
  return Either.right(path)
}

/** A path's status, or why there is none: `ENOENT` (nothing there), `EACCES` (a directory above it is closed to us)… */
const statOf = (path: string): Stats | string => {
  try {
    return statSync(path)
  } catch (error) {
    return String((error as { code?: unknown }).code ?? "ENOENT")
  }
}

const can = (path: string, mode: number): boolean => {
  try {
    accessSync(path, mode)
    return true
  } catch {
    return false
  }
}

/** The account name of a uid, from /etc/passwd; the bare uid when it has none (common in containers). */
const accountOf = (uid: number): string => {
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
  if (uid !== undefined) return accountOf(uid)
  try {
    return userInfo().username
  } catch {
    return "this process's user"
  }
}

const mode = (stats: Stats) => (stats.mode & 0o777).toString(8).padStart(4, "0")

/** Why the file cannot be opened and what to do, from what the file system says about it; SQLite's words otherwise. */
export const diagnose = (path: string, reason: string): string => {
  const file = resolve(path)
  const directory = dirname(file)
  const directoryStats = statOf(directory)
  const fileStats = statOf(file)
  const user = currentUser()
  if (directoryStats === "ENOENT" || directoryStats === "ENOTDIR") {
    return `the directory ${directory} does not exist. Create it, or set DATABASE_URL to a file in an existing directory.`
  }
  if (typeof directoryStats === "string") {
    return `the user ${user} cannot reach the directory ${directory} (${directoryStats}): a directory on the way does not ` +
      `let it through. Give ${user} access to the path (chmod o+x on each directory), or run petstore as their owner.`
  }
  if (!directoryStats.isDirectory()) {
    return `${directory} is not a directory. Set DATABASE_URL to a file in a directory.`
  }
  const virtual = virtualFileSystemOf(directory)
  if (virtual !== undefined) {
    return `${directory} is on ${virtual}, a virtual file system of the kernel that holds no data files. ` +
      WRITABLE_DISK
  }
  if (typeof fileStats !== "string" && fileStats.isDirectory()) {
    return `it is a directory. Set DATABASE_URL to a file, for example ${join(file, "petstore.db")}.`
  }
  if (typeof fileStats !== "string" && !can(file, constants.R_OK | constants.W_OK)) {
    return `the user ${user} cannot write it (it belongs to ${accountOf(fileStats.uid)}, mode ${mode(fileStats)}). ` +
      `Run petstore as its owner, or give ${user} write access to it (chown or chmod).`
  }
  if (!can(directory, constants.W_OK | constants.X_OK)) {
    return `the user ${user} cannot write the directory ${directory} (it belongs to ${
      accountOf(directoryStats.uid)
    }, ` +
      `mode ${mode(directoryStats)}), where SQLite keeps the database and its -wal and -shm files. ` +
      `Run petstore as its owner, or give ${user} write access to it (chown or chmod).`
  }
  const refused = creationRefused(directory)
  if (refused === "EROFS") {
    return `the file system of ${directory} is mounted read-only. Set DATABASE_URL to a file on a writable volume, ` +
      `for example /data/petstore.db.`
  }
  if (refused !== undefined) {
    return `no file can be created in ${directory} (${refused}): its file system refuses new files. ${WRITABLE_DISK}`
  }
  return `SQLite says: ${reason}.`
}

const WRITABLE_DISK = "Set DATABASE_URL to a file on a writable disk, for example /data/petstore.db or ./petstore.db."

/** The kernel's own file systems (their `statfs` magic numbers), where no database can live. */
const VIRTUAL_FILE_SYSTEMS: Record<number, string> = {
  0x9fa0: "proc",
  0x62656572: "sysfs",
  0x1cd1: "devpts",
  0x27e0eb: "cgroup",
  0x63677270: "cgroup2",
  0x64626720: "debugfs",
  0x74726163: "tracefs",
  0x73636673: "securityfs"
}

/** The name of the kernel's virtual file system `directory` is on, if it is on one. */
const virtualFileSystemOf = (directory: string): string | undefined => {
  try {
    return VIRTUAL_FILE_SYSTEMS[statfsSync(directory).type]
  } catch {
    return undefined
  }
}

/**
 * Whether a file can be created in `directory`, tried with a file of its own (removed at once): the error code when
 * not. Permissions can say yes where the file system says no (/proc, /sys, a read-only mount, root's own checks).
 */
const creationRefused = (directory: string): string | undefined => {
  const probe = join(directory, `.petstore-probe-${process.pid}`)
  try {
    closeSync(openSync(probe, "wx"))
    unlinkSync(probe)
    return undefined
  } catch (error) {
    const code = String((error as { code?: unknown }).code ?? "unknown")
    return code === "EEXIST" ? undefined : code
  }
}

/** The message of a SQLite failure (bun:sqlite's `SQLiteError`) somewhere in a failure's chain of causes. */
const sqliteReason = (failure: unknown): string | undefined => {
  for (let error = failure, depth = 0; typeof error === "object" && error !== null && depth < 8; depth++) {
    const { cause, message, name } = error as { cause?: unknown; message?: unknown; name?: unknown }
    if (name === "SQLiteError" && typeof message === "string") return message
    error = cause
  }
  return undefined
}

/**
 * The SQLite layers on `file`, with a failure to open, create or write the file (a defect of the driver included)
 * turned into a `DatabaseFileError` that explains it. Other failures pass as they are.
 */
export const explainingOpenFailures = (file: string) => <A, E, R>(layer: Layer.Layer<A, E, R>) =>
  Layer.catchAllCause(layer, (cause): Layer.Layer<A, E | DatabaseFileError, R> => {
    const failures = [...Cause.failures(cause), ...Cause.defects(cause)]
    const reason = failures.map(sqliteReason).find((reason) => reason !== undefined)
    return reason === undefined
      ? Layer.failCause(cause)
      : Layer.fail(
        new DatabaseFileError({
          message: `DATABASE_URL names the SQLite database ${resolve(file)}, which cannot be opened: ${
            diagnose(file, reason)
          }`
        })
      )
  })
