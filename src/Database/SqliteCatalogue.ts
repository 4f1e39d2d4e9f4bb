/**
 * A SQLite catalogue as `petstore backup` (`Backup.ts`) and `petstore restore` (`Restore.ts`) copy it: the file that
 * DATABASE_URL names (PostgreSQL has tools of its own), a read-only connection to it, its pets counted, one committed
 * state of it written into a new file.
 */
import { Database } from "bun:sqlite"
import { Effect, Redacted, Schema } from "effect"
import { resolve } from "node:path"
import { CommandFailed } from "../CommandFailed.js"
import { reasonOf } from "./DurableFile.js"
import { describeDatabase, isPostgresUrl } from "./Sql.js"
import { IN_MEMORY, readFailure, sqliteFile } from "./SqliteFile.js"

/** `backup` or `restore` asked of a PostgreSQL database, which has tools of its own. Exit code 2. */
export class NotForPostgres extends Schema.TaggedError<NotForPostgres>()("NotForPostgres", {
  message: Schema.String
}) {}

export const POSTGRES_TOOL = {
  backup: "back it up with pg_dump (e.g. pg_dump --format=custom), which takes a consistent snapshot while the " +
    "replicas keep writing, or with the server's own base backups",
  restore: "restore a pg_dump archive with pg_restore (or psql for a plain dump)"
} as const

/** The SQLite file a database URL names, made absolute; PostgreSQL and `:memory:` have none to copy. */
export const sqliteFileOf = (command: "backup" | "restore", url: Redacted.Redacted<string>) =>
  Effect.gen(function*() {
    const value = Redacted.value(url)
    if (isPostgresUrl(value)) {
      return yield* new NotForPostgres({
        message: `${command} copies a SQLite file, and DATABASE_URL names the PostgreSQL database ` +
          `${describeDatabase(url)}, whose data only the PostgreSQL server can copy consistently: ${
            POSTGRES_TOOL[command]
          }.`
      })
    }
    const file = yield* sqliteFile(value)
    if (file === IN_MEMORY) {
      return yield* new CommandFailed({
        message: `DATABASE_URL is ${value}, a database that lives inside one process only: there is no file to ${
          command === "backup" ? "back up" : "restore"
        }.`
      })
    }
    return resolve(file)
  })

/** Runs `f` on the SQLite driver; a failure says `what` could not be done, and why. */
export const attempt = <A>(what: string, f: () => A) =>
  Effect.try({ try: f, catch: (error) => new CommandFailed({ message: `${what}: ${reasonOf(error)}.` }) })

/** `attempt` at reading `file`: a refused access says what access reading needs (`SqliteFile.readFailure`). */
const readAttempt = <A>(file: string, what: string, f: () => A) =>
  Effect.try({
    try: f,
    catch: (error) => new CommandFailed({ message: `cannot read ${what} ${file}: ${readFailure(file, error)}` })
  })

/** A read-only connection to an existing SQLite file that holds a petstore catalogue (a `pets` table). */
export const openCatalogue = (file: string, what: string) =>
  Effect.acquireRelease(
    readAttempt(file, what, () => {
      const db = new Database(file, { readonly: true })
      try {
        // In WAL mode a reader waits only while another connection recovers the WAL after a crash.
        db.run("PRAGMA busy_timeout = 5000")
        const pets = db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pets'").get()
        if (pets === null) throw new Error("it holds no petstore catalogue (no pets table)")
        return db
      } catch (error) {
        db.close()
        throw error
      }
    }),
    (db) => Effect.sync(() => db.close())
  )

export const countPets = (db: Database) =>
  attempt(
    `cannot count the pets of ${db.filename}`,
    () => (db.query("SELECT count(*) AS pets FROM pets").get() as { pets: number }).pets
  )

/** Writes one committed state of `db` into `temporary`, an empty file, on its way to `target`. */
export const snapshotInto = (db: Database, temporary: string, target: string) =>
  attempt(`cannot write ${target}`, () => db.run("VACUUM INTO ?", [temporary]))
