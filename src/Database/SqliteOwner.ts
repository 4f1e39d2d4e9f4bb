/**
 * One `serve` process per SQLite database, by the file itself: the server holds an exclusive `flock` on the database
 * file for as long as it runs, so a second one is refused whatever path names the file (a symlink to it or to its
 * directory, a hard link). It is taken before the database is opened, so a second (or newer) binary never migrates a
 * database another process serves. The lock is the operating system's: it goes with the process, a crash or SIGKILL
 * included. It is apart from SQLite's own (POSIX) locks on the file: `keys`, `backup` and the server's own connections
 * work beside it, and closing one of their descriptors does not drop it (a `flock` belongs to its own open file).
 *
 * A database file that this start created is removed, with its -wal and -shm, when the service never started, so that
 * a start that fails (a port in use, a bad HOST or setting) leaves nothing behind. It is removed while still locked,
 * and whoever takes the lock then checks that the path still names the file it locked, else starts over: no server
 * ever serves a removed file.
 */
import { dlopen, FFIType, read } from "bun:ffi"
import { Database } from "bun:sqlite"
import { Effect, type Scope } from "effect"
import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  openSync,
  readlinkSync,
  realpathSync,
  rmSync,
  statSync
} from "node:fs"
import { constants as os } from "node:os"
import { dirname, resolve } from "node:path"
import { codeOf, isBusy, reasonOf } from "./DurableFile.js"
import { cannotOpen, DatabaseFileError, IN_MEMORY } from "./SqliteFile.js"

/** The file `file` names once its links are followed; `file` itself while it does not exist. */
const realPathOf = (file: string): string => {
  try {
    return realpathSync(file)
  } catch {
    return resolve(file)
  }
}

/** What refuses a second server on the SQLite database `file` (one line: what, why, what to do instead). */
export const alreadyServed = (file: string): string =>
  `another petstore process already serves the SQLite database ${resolve(file)}${
    realPathOf(file) === resolve(file) ? "" : ` (the file ${realPathOf(file)})`
  }: one process serves a SQLite file, under whatever path or link. Stop that one first; to run several processes, ` +
  `store the catalogue in PostgreSQL (DATABASE_URL=postgres://…).`

const ERRNO = process.platform === "darwin" ? "__error" : "__errno_location"
let libc: ReturnType<typeof openLibc> | undefined
const openLibc = () =>
  dlopen(process.platform === "darwin" ? "libSystem.B.dylib" : "libc.so.6", {
    flock: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 },
    [ERRNO]: { args: [], returns: FFIType.ptr }
  }).symbols

const LOCK_EX = 2
const LOCK_NB = 4

/** Locks the open file `fd` for this process without waiting: `undefined` once held, else the errno's name. */
const flock = (fd: number): string | undefined => {
  const symbols = (libc ??= openLibc())
  if (symbols.flock(fd, LOCK_EX | LOCK_NB) === 0) return undefined
  const errno = read.i32(symbols[ERRNO]()!, 0)
  return Object.entries(os.errno).find(([, value]) => value === errno)?.[0] ?? `errno ${errno}`
}

/**
 * The database file opened for its lock, and the path this call created, if it did: `O_EXCL` says so, so that a file
 * another process created meanwhile is never taken for this start's own. A dangling symlink is followed to the file
 * it names, as SQLite would create it.
 */
const openOrCreate = (file: string, links = 0): { readonly fd: number; readonly created: string | undefined } => {
  try {
    return { fd: openSync(file, constants.O_RDWR), created: undefined }
  } catch (error) {
    if (codeOf(error) !== "ENOENT") throw error
  }
  try {
    return { fd: openSync(file, constants.O_RDWR | constants.O_CREAT | constants.O_EXCL, 0o644), created: file }
  } catch (error) {
    if (codeOf(error) !== "EEXIST" || links > 40) throw error
  }
  const target = (() => {
    try {
      return resolve(dirname(file), readlinkSync(file))
    } catch {
      return file // not a link: created by another process meanwhile
    }
  })()
  return openOrCreate(target, links + 1)
}

/** Whether the path `file` still names the open file `fd` (a failed start may have removed it meanwhile). */
const names = (file: string, fd: number): boolean => {
  const held = fstatSync(fd)
  try {
    const named = statSync(file)
    return named.dev === held.dev && named.ino === held.ino
  } catch {
    return false
  }
}

/**
 * The `<database>.lock` of earlier versions, on which their server holds an exclusive SQLite transaction: taken as
 * they take it, when it exists (it is never created): through an upgrade, an earlier server still serving the file
 * refuses this one, and one started later finds it held.
 */
const earlierLock = (file: string): Database | undefined => {
  const path = `${resolve(file)}.lock`
  if (!existsSync(path)) return undefined
  const lock = new Database(path, { create: false, readwrite: true })
  try {
    lock.run("PRAGMA busy_timeout = 0")
    lock.run("PRAGMA journal_mode = MEMORY")
    lock.run("BEGIN EXCLUSIVE")
    return lock
  } catch (error) {
    lock.close()
    throw new DatabaseFileError({
      message: isBusy(error) ? alreadyServed(file) : `the lock file ${path} of an earlier petstore cannot be taken ` +
        `(${reasonOf(error)}): remove it once no earlier petstore serves ${resolve(file)}.`
    })
  }
}

interface Held {
  readonly fd: number
  readonly created: string | undefined
  readonly earlier: Database | undefined
}

const take = (file: string): Held => {
  for (;;) {
    const { created, fd } = openOrCreate(file)
    let refused: string | undefined
    try {
      refused = flock(fd)
    } catch (error) {
      closeSync(fd)
      throw error
    }
    if (refused === undefined && names(file, fd)) {
      try {
        return { fd, created, earlier: earlierLock(file) }
      } catch (error) {
        release({ fd, created, earlier: undefined }, false)
        throw error
      }
    }
    closeSync(fd)
    if (refused === "EWOULDBLOCK" || refused === "EAGAIN") throw new DatabaseFileError({ message: alreadyServed(file) })
    if (refused !== undefined) {
      throw new DatabaseFileError({
        message: `the SQLite database ${resolve(file)} cannot be locked for this server (${refused}): its file ` +
          `system does not support locks. Set DATABASE_URL to a file on a local disk.`
      })
    }
  }
}

/** Lets the file go; first, when this start created it and the service never started, removes it and its companions. */
const release = (held: Held, started: boolean) => {
  try {
    if (held.created !== undefined && !started) {
      for (const suffix of ["", "-wal", "-shm", "-journal"]) {
        try {
          rmSync(`${held.created}${suffix}`, { force: true })
        } catch {
          // left behind as it is: what cannot be removed here is no reason to fail the stop
        }
      }
    }
  } finally {
    held.earlier?.close()
    closeSync(held.fd)
  }
}

/**
 * Takes the SQLite database `file` for this process until the scope closes, or fails with `alreadyServed` (or why the
 * file cannot be opened). `started`, asked when the scope closes, says whether the service started: a file this call
 * created is removed if not.
 */
export const own = (
  file: string,
  started: Effect.Effect<boolean>
): Effect.Effect<void, DatabaseFileError, Scope.Scope> =>
  file === IN_MEMORY ? Effect.void : Effect.asVoid(Effect.acquireRelease(
    Effect.try({
      try: () => take(file),
      catch: (error) =>
        error instanceof DatabaseFileError
          ? error
          : new DatabaseFileError({ message: cannotOpen(file, reasonOf(error)) })
    }),
    (held) => Effect.flatMap(started, (started) => Effect.sync(() => release(held, started)))
  ))
