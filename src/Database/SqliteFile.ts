/**
 * The SQLite file `DATABASE_URL` names (a path, `:memory:` or a `file:` URI, read here so that every connection opens
 * the same database), and, when it cannot be opened, why: one line naming the path, the reason and what to do.
 */
import { Cause, Either, Layer, Schema } from "effect"
import { accessSync, closeSync, constants, openSync, statfsSync, type Stats, statSync, unlinkSync } from "node:fs"
import { basename, dirname, join, resolve } from "node:path"
import { accountOf, codeOf, currentUser, findInCauses, reasonOf } from "./DurableFile.js"

export class DatabaseFileError extends Schema.TaggedError<DatabaseFileError>()("DatabaseFileError", {
  message: Schema.String
}) {}

export const IN_MEMORY = ":memory:"

const ONLY_MODES = "(only mode=rwc or mode=memory)"

/**
 * The file a SQLite `DATABASE_URL` names, or `:memory:`. `file:` URIs (`file:pets.db`, `file:///data/pets.db`,
 * `file::memory:`, `?mode=memory`) are read here: SQLite as Bun opens it would take them for file names.
 */
export const sqliteFile = (url: string): Either.Either<string, DatabaseFileError> => {
  const fail = (message: string) => Either.left(new DatabaseFileError({ message }))
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(url)?.[1]
  if (scheme !== undefined && scheme.toLowerCase() !== "file") {
    // Only the scheme is shown: the rest of such a URL may hold a password.
    return fail(
      `DATABASE_URL is a ${scheme}:// URL, which petstore cannot use: it stores its catalogue in SQLite or ` +
        `PostgreSQL. Set DATABASE_URL to a postgres:// (or postgresql://) URL, or to a SQLite file: a path such as ` +
        `/data/petstore.db, a file: URI such as file:///data/petstore.db, or :memory:.`
    )
  }
  if (!/^file:/i.test(url)) return Either.right(url)
  const refuse = (why: string) => fail(`DATABASE_URL=${url} is not a SQLite file URI petstore can open: ${why}.`)
  const [beforeQuery, query = ""] = url.slice("file:".length).split("#")[0].split("?", 2)
  const authority = beforeQuery.startsWith("//") ? beforeQuery.slice(2).split("/")[0] : ""
  if (authority !== "" && authority !== "localhost") return refuse(`the host '${authority}' is not this machine`)
  let path = beforeQuery.startsWith("//") ? beforeQuery.slice(2 + authority.length) : beforeQuery
  try {
    path = decodeURIComponent(path)
  } catch {
    return refuse("its path is not valid percent-encoding")
  }
  const params = new URLSearchParams(query)
  const unknown = [...params.keys()].find((key) => key !== "mode")
  if (unknown !== undefined) return refuse(`the parameter '${unknown}' is not supported ${ONLY_MODES}`)
  const mode = params.get("mode") ?? "rwc"
  if (mode !== "rwc" && mode !== "memory") return refuse(`mode=${mode} is not supported ${ONLY_MODES}`)
  if (mode === "memory" || path === IN_MEMORY) return Either.right(IN_MEMORY)
  return path === "" ? refuse("it names no file") : Either.right(path)
}

/** What `f` returns, or the code of the error it throws (`ENOENT`, `EACCES`, `EROFS`…). */
const orCode = <A>(f: () => A): A | string => {
  try {
    return f()
  } catch (error) {
    return codeOf(error) ?? "unknown"
  }
}

const can = (path: string, mode: number) => orCode(() => (accessSync(path, mode), true)) === true

const owner = (stats: Stats) =>
  `it belongs to ${accountOf(stats.uid)}, mode ${(stats.mode & 0o777).toString(8).padStart(4, "0")}`

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

const virtualFileSystemOf = (directory: string): string | undefined => {
  const type = orCode(() => statfsSync(directory).type)
  return typeof type === "number" ? VIRTUAL_FILE_SYSTEMS[type] : undefined
}

/**
 * Why no file can be created in `directory` (an error code), tried with a file of its own, removed at once:
 * permissions can say yes where the file system says no (/proc, /sys, a read-only mount, root's own checks).
 */
const creationRefused = (directory: string): string | undefined => {
  const probe = join(directory, `.petstore-probe-${process.pid}`)
  const refused = orCode<undefined>(() => {
    closeSync(openSync(probe, "wx"))
    unlinkSync(probe)
  })
  return refused === "EEXIST" ? undefined : refused
}

const WRITABLE_DISK = "Set DATABASE_URL to a file on a writable disk, for example /data/petstore.db or ./petstore.db."

/** Why the file cannot be opened and what to do, from what the file system says about it; `reason` otherwise. */
const diagnose = (path: string, reason: string): string => {
  const file = resolve(path)
  const directory = dirname(file)
  const directoryStats = orCode(() => statSync(directory))
  const fileStats = orCode(() => statSync(file))
  const user = currentUser()
  const giveAccess = `Run petstore as its owner, or give ${user} write access to it (chown or chmod).`
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
    return `${directory} is on ${virtual}, a virtual file system of the kernel that holds no data files. ${WRITABLE_DISK}`
  }
  if (typeof fileStats !== "string" && fileStats.isDirectory()) {
    return `it is a directory. Set DATABASE_URL to a file, for example ${join(file, "petstore.db")}.`
  }
  if (typeof fileStats !== "string" && !can(file, constants.R_OK | constants.W_OK)) {
    return `the user ${user} cannot write it (${owner(fileStats)}). ${giveAccess}`
  }
  if (!can(directory, constants.W_OK | constants.X_OK)) {
    return `the user ${user} cannot write the directory ${directory} (${owner(directoryStats)}), where SQLite keeps ` +
      `the database and its -wal and -shm files. ${giveAccess}`
  }
  const refused = creationRefused(directory)
  if (refused === "EROFS") {
    return `the file system of ${directory} is mounted read-only. Set DATABASE_URL to a file on a writable volume, ` +
      `for example /data/petstore.db.`
  }
  if (refused !== undefined) {
    return `no file can be created in ${directory} (${refused}): its file system refuses new files. ${WRITABLE_DISK}`
  }
  return `${reason}.`
}

const openFailure = (path: string, explanation: string) =>
  `DATABASE_URL names the SQLite database ${resolve(path)}, which cannot be opened: ${explanation}`

/** The one line that says the SQLite database `path` cannot be opened, why and what to do (`reason` if unexplained). */
export const cannotOpen = (path: string, reason: string): string => openFailure(path, diagnose(path, reason))

/**
 * Why a command that only reads (`keys list`, `backup`) cannot read the database `path`, and what access it needs, when
 * the file system explains it; else none. A database in WAL mode is read through its `-wal` and `-shm` files: the last
 * connection to close removes them, so with no server running a reader must create them in the directory; while one
 * runs they exist, and read access is enough.
 */
export const readAccessProblem = (path: string): string | undefined => {
  const file = resolve(path)
  const directory = dirname(file)
  const user = currentUser()
  const fileStats = orCode(() => statSync(file))
  if (typeof fileStats === "string") return undefined
  if (!can(file, constants.R_OK)) {
    return `the user ${user} cannot read it (${owner(fileStats)}). Run this as its owner, or give ${user} read ` +
      `access to it (chmod or chgrp).`
  }
  const companions = [`${file}-wal`, `${file}-shm`]
  const missing = companions.filter((companion) => orCode(() => statSync(companion)) === "ENOENT")
  if (missing.length > 0 && !can(directory, constants.W_OK | constants.X_OK)) {
    const directoryStats = orCode(() => statSync(directory))
    const name = basename(file)
    return `the user ${user} may read it, but SQLite reads a database in WAL mode through its ${name}-wal and ` +
      `${name}-shm files, which are absent while no server runs and which it cannot create in ${directory}` +
      `${typeof directoryStats === "string" ? "" : ` (${owner(directoryStats)})`}. Run this as the database's owner ` +
      `(${accountOf(fileStats.uid)}) or while a server runs, or give ${user} write access to ${directory}.`
  }
  const unreadable = companions.find((companion) => !missing.includes(companion) && !can(companion, constants.R_OK))
  return unreadable === undefined
    ? undefined
    : `the user ${user} may read it, but not ${unreadable}, through which SQLite reads it. Run this as the ` +
      `database's owner (${accountOf(fileStats.uid)}), or give ${user} read access to ${unreadable}.`
}

/** Why reading the database `path` failed: for a refused access, what access is missing; else the driver's words. */
export const readFailure = (path: string, failure: unknown): string => {
  const refused = /^(?:SQLITE_READONLY|SQLITE_CANTOPEN|SQLITE_PERM|EACCES|EPERM)/.test(codeOf(failure) ?? "")
  return (refused ? readAccessProblem(path) : undefined) ?? `${reasonOf(failure)}.`
}

/**
 * The SQLite layers on `file`, with a failure to open, create or write the file (a defect of the driver included)
 * turned into a `DatabaseFileError` that explains it; for layers that only `read`, the read access it lacks first.
 * Other failures pass as they are.
 */
export const explainingOpenFailures = (file: string, access: "read" | "write" = "write") =>
<A, E, R>(
  layer: Layer.Layer<A, E, R>
) =>
  Layer.catchAllCause(layer, (cause): Layer.Layer<A, E | DatabaseFileError, R> => {
    const reason = [...Cause.failures(cause), ...Cause.defects(cause)]
      .map(
        findInCauses(({ message, name }) => name === "SQLiteError" && typeof message === "string" ? message : undefined)
      )
      .find((reason) => reason !== undefined)
    return reason === undefined ? Layer.failCause(cause) : Layer.fail(
      new DatabaseFileError({
        message: openFailure(
          file,
          (access === "read" ? readAccessProblem(file) : undefined) ?? diagnose(file, `SQLite says: ${reason}`)
        )
      })
    )
  })
