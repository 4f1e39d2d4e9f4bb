/**
 * Files put in place whole or not at all, for `petstore backup` and `petstore restore`: the content is written under a
 * temporary name in the destination's directory, synced, renamed over the destination, and the directory synced, so
 * that after a crash or a power cut the destination holds the old file or the new one, complete. And the one-line
 * reasons a file operation fails, as an operator reads them.
 */
import { FileSystem } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Effect, type Scope } from "effect"
import { randomBytes } from "node:crypto"
import { basename, dirname, join } from "node:path"

/** The `code` of an error somewhere in a failure's chain of causes (`ENOSPC`, `SQLITE_FULL`). */
export const codeOf = (failure: unknown): string | undefined => {
  for (let error = failure, depth = 0; typeof error === "object" && error !== null && depth < 8; depth++) {
    const { cause, code } = error as { cause?: unknown; code?: unknown }
    if (typeof code === "string") return code
    error = cause
  }
  return undefined
}

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
  const message = (failure as { message?: unknown })?.message
  return typeof message === "string" && message !== "" ? message : String(failure)
}

/** A fresh name in `target`'s directory, hidden, for the content on its way to `target`. */
export const temporaryBeside = (target: string): string =>
  join(dirname(target), `.${basename(target)}.${randomBytes(6).toString("hex")}.tmp`)

/**
 * Creates `temporary` (it must not exist) and keeps it open for `sync`; removes it when the scope closes unless it was
 * renamed into place by then.
 */
export const createTemporary = (temporary: string): Effect.Effect<
  { readonly sync: Effect.Effect<void, PlatformError> },
  PlatformError,
  FileSystem.FileSystem | Scope.Scope
> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* Effect.addFinalizer(() => Effect.ignore(fs.remove(temporary)))
    const file = yield* fs.open(temporary, { flag: "wx" })
    return { sync: file.sync }
  })

/** Renames `temporary` (already synced) over `target`, then syncs the directory so that the rename is on disk too. */
export const renameIntoPlace = (temporary: string, target: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* fs.rename(temporary, target)
    yield* Effect.scoped(Effect.flatMap(fs.open(dirname(target), { flag: "r" }), (directory) => directory.sync))
  })

/** A size as people read it: `512 B`, `48.2 kB`, `104.9 MB`, `2.1 GB`. */
export const formatSize = (bytes: number): string => {
  if (bytes < 1000) return `${bytes} B`
  const units = ["kB", "MB", "GB", "TB"]
  let value = bytes / 1000
  let unit = 0
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000
    unit++
  }
  return `${value.toFixed(1)} ${units[unit]}`
}

/** A time taken as people read it: `45 ms`, `3.1 s`. */
export const formatMillis = (millis: number): string =>
  millis < 1000 ? `${Math.round(millis)} ms` : `${(millis / 1000).toFixed(1)} s`
