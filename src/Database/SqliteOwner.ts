/**
 * One `serve` process per SQLite file. The server holds an exclusive SQLite lock on `<database>.lock`, a file of its
 * own beside the database, for as long as it runs: a second server on the same file finds it taken and refuses to
 * start. The lock is the operating system's (SQLite's POSIX advisory locks): it goes with the process, a crash or
 * SIGKILL included, so it never outlives its holder. The database itself is not locked: `keys`, `backup` and the
 * server's own connections work beside it as before.
 */
import { Database } from "bun:sqlite"
import { Effect, type Scope } from "effect"
import { resolve } from "node:path"
import { isBusy } from "./DurableFile.js"
import { DatabaseFileError, IN_MEMORY } from "./SqliteFile.js"

/** The lock file of the database `file`. */
export const lockFileOf = (file: string): string => `${resolve(file)}.lock`

/** What refuses a second server on the SQLite database `file` (one line: what, why, what to do instead). */
export const alreadyServed = (file: string): string =>
  `another petstore process already serves the SQLite database ${resolve(file)} (it holds ${lockFileOf(file)}): ` +
  `one process serves a SQLite file. Stop that one first; to run several processes, store the catalogue in ` +
  `PostgreSQL (DATABASE_URL=postgres://…).`

/**
 * Takes the SQLite database `file` for this process until the scope closes, or fails with `alreadyServed`. The lock
 * file has no journal and no content: an exclusive transaction that is never committed is the lock.
 */
export const own = (file: string): Effect.Effect<void, DatabaseFileError, Scope.Scope> =>
  file === IN_MEMORY ? Effect.void : Effect.asVoid(Effect.acquireRelease(
    Effect.try({
      try: () => {
        const lock = new Database(lockFileOf(file), { create: true, readwrite: true })
        try {
          lock.run("PRAGMA busy_timeout = 0")
          lock.run("PRAGMA journal_mode = MEMORY")
          lock.run("BEGIN EXCLUSIVE")
          return lock
        } catch (error) {
          lock.close()
          throw error
        }
      },
      catch: (error) =>
        new DatabaseFileError({
          message: isBusy(error)
            ? alreadyServed(file)
            : `the lock file ${lockFileOf(file)}, which marks the process serving ${resolve(file)}, cannot be taken: ${
              (error as Error)?.message ?? String(error)
            }.`
        })
    }),
    (lock) => Effect.sync(() => lock.close())
  ))
