/**
 * `petstore backup FILE`: a consistent snapshot of the SQLite catalogue (pets, API keys, idempotency records, the
 * migrations applied: the whole database), taken while servers keep serving and writing to it.
 *
 * The snapshot is SQLite's `VACUUM INTO`, run on a read-only connection of this process: one read transaction, so the
 * copy is one committed state; in WAL mode a reader never blocks the server's writer, nor does the writer block it. The
 * copy is put in place whole (`DurableFile.ts`).
 */
import { FileSystem } from "@effect/platform"
import { Database } from "bun:sqlite"
import { Clock, Effect, Either, Option, Redacted, Schema } from "effect"
import { resolve } from "node:path"
import { CommandFailed } from "../CommandFailed.js"
import { exists, reasonOf, writeWhole } from "./DurableFile.js"
import { describeDatabase, isPostgresUrl } from "./Sql.js"
import { IN_MEMORY, sqliteFile } from "./SqliteFile.js"

/** `backup` or `restore` asked of a PostgreSQL database, which has tools of its own. Exit code 2. */
export class NotForPostgres extends Schema.TaggedError<NotForPostgres>()("NotForPostgres", {
  message: Schema.String
}) {}

const POSTGRES_TOOL = {
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
    const file = yield* Either.match(sqliteFile(value), { onLeft: Effect.fail, onRight: Effect.succeed })
    if (file === IN_MEMORY) {
      return yield* new CommandFailed({
        message: `DATABASE_URL is ${value}, a database that lives inside one process only: there is no file to ${
          command === "backup" ? "back up" : "restore"
        }.`
      })
    }
    return resolve(file)
  })

/** A read-only connection to an existing SQLite file that holds a petstore catalogue (a `pets` table). */
export const openCatalogue = (file: string, what: string) =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
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
      },
      catch: (error) => new CommandFailed({ message: `cannot read ${what} ${file}: ${reasonOf(error)}.` })
    }),
    (db) => Effect.sync(() => db.close())
  )

export const countPets = (db: Database) =>
  Effect.try({
    try: () => (db.query("SELECT count(*) AS pets FROM pets").get() as { pets: number }).pets,
    catch: (error) => new CommandFailed({ message: `cannot count the pets of ${db.filename}: ${reasonOf(error)}.` })
  })

/** Writes one committed state of `db` into `temporary`, an empty file, on its way to `target`. */
export const snapshotInto = (db: Database, temporary: string, target: string) =>
  Effect.try({
    try: () => db.run("VACUUM INTO ?", [temporary]),
    catch: (error) => new CommandFailed({ message: `cannot write ${target}: ${reasonOf(error)}.` })
  })

/** Refuses a FILE that exists (unless `force`), that is a directory, or that is the database itself. */
const checkTarget = (target: string, database: string, force: boolean) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const existing = yield* Effect.option(fs.stat(target))
    if (Option.isNone(existing)) return
    const stats = existing.value
    if (stats.type === "Directory") {
      return yield* new CommandFailed({ message: `${target} is a directory; name a file, e.g. ${target}/backup.db.` })
    }
    const source = yield* Effect.option(fs.stat(database))
    const same = Option.isSome(source) && Option.isSome(source.value.ino) && Option.isSome(stats.ino) &&
      source.value.dev === stats.dev && source.value.ino.value === stats.ino.value
    if (same || target === database) {
      return yield* new CommandFailed({ message: `${target} is the database itself; name another file.` })
    }
    if (!force) return yield* new CommandFailed({ message: `${target} exists; pass --force to replace it.` })
  })

/** Writes a snapshot of the SQLite database `database` names to `file`: where, how many pets, its size, how long. */
export const backup = (options: {
  readonly database: Redacted.Redacted<string>
  readonly file: string
  readonly force: boolean
}) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const database = yield* sqliteFileOf("backup", options.database)
    const path = resolve(options.file)
    yield* checkTarget(path, database, options.force)
    if (!(yield* exists(database))) {
      return yield* new CommandFailed({
        message: `cannot read the database ${database}: there is no such file (DATABASE_URL or --database names it).`
      })
    }
    const started = yield* Clock.currentTimeMillis
    const pets = yield* Effect.scoped(Effect.flatMap(openCatalogue(database, "the database"), (db) =>
      writeWhole(path, (temporary) =>
        Effect.zipRight(
          snapshotInto(db, temporary, path),
          Effect.scoped(Effect.flatMap(openCatalogue(temporary, "the snapshot"), countPets))
        ))))
    const bytes = yield* fs.stat(path).pipe(
      Effect.map((stats) =>
        Number(stats.size)
      ),
      Effect.mapError(() => new CommandFailed({ message: `cannot read ${path} back after writing it.` }))
    )
    return { path, database, pets, bytes, millis: (yield* Clock.currentTimeMillis) - started }
  })
