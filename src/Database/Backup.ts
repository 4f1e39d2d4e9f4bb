/**
 * `petstore backup FILE`, for a SQLite catalogue (PostgreSQL has tools of its own).
 *
 * A backup is a consistent snapshot of the whole database (pets, API keys, idempotency records, the migrations
 * applied), taken while servers keep serving and writing to it: one read transaction, so one committed state; in WAL
 * mode neither the reader nor the server's writer waits for the other. `petstore backup` copies with SQLite's
 * `VACUUM INTO`, one statement that holds the thread until the copy is done; a server backing itself up
 * (`ScheduledBackups.ts`) copies the same state a few thousand rows at a time, with a pause between steps, so that its
 * event loop keeps serving.
 *
 * The new file is put in place whole (`DurableFile.ts`).
 */
import { FileSystem } from "@effect/platform"
import { Database } from "bun:sqlite"
import { Clock, Duration, Effect, Option, Redacted } from "effect"
import { resolve } from "node:path"
import { CommandFailed } from "../CommandFailed.js"
import { exists, writeWhole } from "./DurableFile.js"
import { attempt, countPets, openCatalogue, snapshotInto, sqliteFileOf } from "./SqliteCatalogue.js"

/** A copy made in steps: at most `rows` rows of a table in each, `pause` between two. */
export interface Pace {
  readonly rows: number
  readonly pause: Duration.Duration
}

/** Below every rowid: where the walk of a table starts. */
const FIRST_ROWID = -(2n ** 63n)

/** A backup holds the keys' hashes: readable and writable by its owner alone. */
const OWNER_ONLY = 0o600

const quoted = (name: string) => `"${name.replace(/"/g, "\"\"")}"`

interface SchemaEntry {
  readonly type: string
  readonly name: string
  readonly sql: string
}

/**
 * Writes one committed state of the database file `database` into `temporary`, as `VACUUM INTO` does, but `pace.rows`
 * rows at a time with `pace.pause` between steps, so that the thread is never held for long. One connection, on the
 * new file, with the database attached: its transaction reads the database from its first statement to its `COMMIT`,
 * so every step sees the same committed state. The new file is written without a journal (until it is complete it is
 * a temporary file, removed on failure) and synced by `writeWhole`. The page size, the schema (tables, then their
 * indexes, filled row by row; triggers and views once the rows are in), the AUTOINCREMENT counters, `user_version` and
 * `application_id` are the database's. Interrupted between steps, the transaction is abandoned with the connection.
 * Answers the number of pets copied (counted as they are copied: a `count(*)` of a large catalogue is a step too long).
 */
const copyInSteps = (database: string, temporary: string, target: string, pace: Pace) =>
  Effect.scoped(Effect.gen(function*() {
    const write = <A>(f: () => A) => attempt(`cannot write ${target}`, f)
    const db = yield* Effect.acquireRelease(
      write(() => new Database(temporary, { safeIntegers: true })),
      (db) => Effect.sync(() => db.close())
    )
    const tables = yield* write(() => {
      db.run("PRAGMA journal_mode = OFF")
      db.run("PRAGMA synchronous = OFF")
      db.run("PRAGMA busy_timeout = 5000")
      db.run("ATTACH ? AS source", [database])
      for (const pragma of ["page_size", "auto_vacuum"]) {
        const value = db.query(`PRAGMA source.${pragma}`).values()[0][0]
        db.run(`PRAGMA main.${pragma} = ${Number(value)}`)
      }
      db.run("BEGIN")
      // The first read of the database: from here to COMMIT, every read sees this committed state.
      const schema = db.query(
        `SELECT type, name, sql FROM source.sqlite_master
         WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid`
      ).all() as Array<SchemaEntry>
      for (const type of ["table", "index"]) {
        for (const entry of schema) if (entry.type === type) db.run(entry.sql)
      }
      const withoutRowid = new Set(
        (db.query("PRAGMA source.table_list").all() as Array<{ name: string; wr: bigint }>)
          .filter((table) => table.wr !== 0n).map((table) => table.name)
      )
      return { schema, created: schema.filter((entry) => entry.type === "table"), withoutRowid }
    })
    let pets = 0
    for (const { name } of tables.created) {
      const table = quoted(name)
      if (tables.withoutRowid.has(name)) {
        // petstore has no such table; one step copies it whole.
        yield* write(() => db.run(`INSERT INTO main.${table} SELECT * FROM source.${table}`))
        continue
      }
      let copied = 0
      const next = db.query(
        `SELECT max(rowid) AS last FROM (SELECT rowid FROM source.${table} WHERE rowid > ?1 ORDER BY rowid LIMIT ?2)`
      )
      const copy = db.query(`INSERT INTO main.${table} SELECT * FROM source.${table} WHERE rowid > ?1 AND rowid <= ?2`)
      let after = FIRST_ROWID
      for (;;) {
        const last = yield* write(() => {
          const { last } = next.get(after, pace.rows) as { last: bigint | null }
          if (last !== null) copied += Number(copy.run(after, last).changes)
          return last
        })
        if (last === null) break
        after = last
        yield* Effect.sleep(pace.pause)
      }
      if (name === "pets") pets = copied
    }
    yield* write(() => {
      const sequence = db.query("SELECT 1 FROM source.sqlite_master WHERE name = 'sqlite_sequence'").get()
      if (sequence !== null) {
        // The inserts raised the counters to the largest id copied; the database's own may be higher.
        db.run("DELETE FROM main.sqlite_sequence")
        db.run("INSERT INTO main.sqlite_sequence SELECT * FROM source.sqlite_sequence")
      }
      for (const entry of tables.schema) if (entry.type === "trigger" || entry.type === "view") db.run(entry.sql)
      for (const pragma of ["user_version", "application_id"]) {
        db.run(`PRAGMA main.${pragma} = ${Number(db.query(`PRAGMA source.${pragma}`).values()[0][0])}`)
      }
      db.run("COMMIT")
    })
    return pets
  }))

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

/**
 * Writes a snapshot of the SQLite database `database` names to `file`: where, how many pets, its size, how long. With a
 * `pace`, the copy is made in steps (`copyInSteps`), for a process that keeps serving while it copies.
 */
export const backup = (options: {
  readonly database: Redacted.Redacted<string>
  readonly file: string
  readonly force: boolean
  readonly pace?: Pace
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
      writeWhole(
        path,
        (temporary) =>
          options.pace === undefined
            ? Effect.zipRight(
              snapshotInto(db, temporary, path),
              Effect.scoped(Effect.flatMap(openCatalogue(temporary, "the snapshot"), countPets))
            )
            : copyInSteps(database, temporary, path, options.pace),
        Effect.void,
        OWNER_ONLY
      )))
    const { size } = yield* fs.stat(path).pipe(
      Effect.orElseFail(() => new CommandFailed({ message: `cannot read ${path} back after writing it.` }))
    )
    return { path, database, pets, bytes: Number(size), millis: (yield* Clock.currentTimeMillis) - started }
  })
