/**
 * `petstore backup FILE` and `petstore restore FILE`, for a SQLite catalogue (PostgreSQL has tools of its own).
 *
 * A backup is a consistent snapshot of the whole database (pets, API keys, idempotency records, the migrations applied),
 * taken while servers keep serving and writing to it: one read transaction, so one committed state; in WAL mode neither
 * the reader nor the server's writer waits for the other. `petstore backup` copies with SQLite's `VACUUM INTO`, one
 * statement that holds the thread until the copy is done; a server backing itself up (`ScheduledBackups.ts`) copies the
 * same state a few thousand rows at a time, with a pause between steps, so that its event loop keeps serving.
 *
 * A restore puts a snapshot in place of the database, with the service stopped: the snapshot must pass
 * `PRAGMA integrity_check`, a database that another process has open (a server) is refused, and the database's `-wal`
 * and `-shm` files, which belong to the old database, are removed before the copy is renamed over it.
 *
 * Either way the new file is put in place whole (`DurableFile.ts`).
 */
import { FileSystem } from "@effect/platform"
import { Database } from "bun:sqlite"
import { Clock, Duration, Effect, Option, Redacted, Schema } from "effect"
import { resolve } from "node:path"
import { CommandFailed } from "../CommandFailed.js"
import { cannotWrite, exists, isBusy, reasonOf, writeWhole } from "./DurableFile.js"
import { newFeedId } from "./Migrations.js"
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
const attempt = <A>(what: string, f: () => A) =>
  Effect.try({ try: f, catch: (error) => new CommandFailed({ message: `${what}: ${reasonOf(error)}.` }) })

/** `attempt` at reading `file`: a refused access says what access reading needs (`SqliteFile.readFailure`). */
const readAttempt = <A>(file: string, what: string, f: () => A) =>
  Effect.try({
    try: f,
    catch: (error) => new CommandFailed({ message: `cannot read ${what} ${file}: ${readFailure(file, error)}` })
  })

/** A read-only connection to an existing SQLite file that holds a petstore catalogue (a `pets` table). */
const openCatalogue = (file: string, what: string) =>
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

const countPets = (db: Database) =>
  attempt(
    `cannot count the pets of ${db.filename}`,
    () => (db.query("SELECT count(*) AS pets FROM pets").get() as { pets: number }).pets
  )

/** Writes one committed state of `db` into `temporary`, an empty file, on its way to `target`. */
const snapshotInto = (db: Database, temporary: string, target: string) =>
  attempt(`cannot write ${target}`, () => db.run("VACUUM INTO ?", [temporary]))

/** A copy made in steps: at most `rows` rows of a table in each, `pause` between two. */
export interface Pace {
  readonly rows: number
  readonly pause: Duration.Duration
}

/** Below every rowid: where the walk of a table starts. */
const FIRST_ROWID = -(2n ** 63n)

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
      writeWhole(path, (temporary) =>
        options.pace === undefined
          ? Effect.zipRight(
            snapshotInto(db, temporary, path),
            Effect.scoped(Effect.flatMap(openCatalogue(temporary, "the snapshot"), countPets))
          )
          : copyInSteps(database, temporary, path, options.pace))))
    const { size } = yield* fs.stat(path).pipe(
      Effect.orElseFail(() =>
        new CommandFailed({ message: `cannot read ${path} back after writing it.` })
      )
    )
    return { path, database, pets, bytes: Number(size), millis: (yield* Clock.currentTimeMillis) - started }
  })

/**
 * Fails when a process has `database` open. Every connection to a WAL database holds a lock on it while it is
 * open, so the exclusive lock that `locking_mode = EXCLUSIVE` takes at the first read is refused while one exists.
 */
const refuseWhileOpen = (database: string) =>
  Effect.try({
    try: () => {
      const db = new Database(database, { readwrite: true, create: false })
      try {
        db.run("PRAGMA busy_timeout = 0")
        db.run("PRAGMA locking_mode = EXCLUSIVE")
        db.run("BEGIN EXCLUSIVE")
        db.run("COMMIT")
      } finally {
        db.close()
      }
    },
    catch: (error) =>
      new CommandFailed({
        message: isBusy(error)
          ? `the database ${database} is open in another process (a server?): stop the service, then restore.`
          : `cannot open the database ${database}: ${reasonOf(error)}.`
      })
  })

const checkIntegrity = (db: Database, file: string) =>
  Effect.flatMap(
    attempt(
      `cannot check ${file}`,
      () => db.query("PRAGMA integrity_check").all() as Array<{ integrity_check: string }>
    ),
    (rows) =>
      rows.length === 1 && rows[0].integrity_check === "ok" ? Effect.void : new CommandFailed({
        message: `${file} fails PRAGMA integrity_check (${
          rows[0]?.integrity_check ?? "no answer"
        }); it is not restored.`
      })
  )

/**
 * The old database's mode, and its owner when this process may give it (root): a restore run as root (`docker exec -u
 * root`) leaves a file the service's user can still write.
 */
const keepOwnerAndMode = (database: string, temporary: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const old = yield* Effect.option(fs.stat(database))
    if (Option.isNone(old)) return
    const { gid, mode, uid } = old.value
    yield* fs.chmod(temporary, mode & 0o777)
    if (process.getuid?.() === 0 && Option.isSome(uid) && Option.isSome(gid)) {
      yield* fs.chown(temporary, uid.value, gid.value)
    }
  }).pipe(Effect.catchAll(cannotWrite(database)))

/**
 * The restored catalogue's feed gets an id of its own, so that a position the replaced database handed out is gone
 * (410) rather than taken for a position of this one. A snapshot older than the feed has none yet: its migration
 * makes one at the next start.
 */
const renewFeedId = (temporary: string, target: string) =>
  attempt(`cannot write ${target}`, () => {
    const db = new Database(temporary, { readwrite: true, create: false })
    try {
      if (db.query("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'feed_meta'").get() !== null) {
        db.run("UPDATE feed_meta SET id = ?", [newFeedId()])
      }
    } finally {
      db.close()
    }
  })

/** Puts the snapshot `file` in place of the database: the database's path, the snapshot's, its number of pets. */
export const restore = (options: { readonly database: Redacted.Redacted<string>; readonly file: string }) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* sqliteFileOf("restore", options.database)
    const snapshot = resolve(options.file)
    if (snapshot === path) {
      return yield* new CommandFailed({ message: `${snapshot} is the database itself; name a snapshot.` })
    }
    if (!(yield* exists(snapshot))) {
      return yield* new CommandFailed({ message: `cannot read the snapshot ${snapshot}: there is no such file.` })
    }
    const present = yield* exists(path)
    if (present) yield* refuseWhileOpen(path)
    const removeOld = (file: string) =>
      fs.remove(file, { force: true }).pipe(Effect.mapError((error) =>
        new CommandFailed({
          message: `cannot remove ${file}, which belongs to the old database: ${reasonOf(error)}.`
        })
      ))
    const pets = yield* Effect.scoped(Effect.gen(function*() {
      const db = yield* openCatalogue(snapshot, "the snapshot")
      yield* checkIntegrity(db, snapshot)
      const pets = yield* countPets(db)
      yield* writeWhole(
        path,
        (temporary) =>
          snapshotInto(db, temporary, path).pipe(
            Effect.zipRight(renewFeedId(temporary, path)),
            Effect.zipRight(keepOwnerAndMode(path, temporary))
          ),
        // Checked again just before the old database goes: a server may have started meanwhile.
        Effect.zipRight(
          present ? refuseWhileOpen(path) : Effect.void,
          Effect.zipRight(removeOld(`${path}-wal`), removeOld(`${path}-shm`))
        )
      )
      return pets
    }))
    return { path, snapshot, pets }
  })
