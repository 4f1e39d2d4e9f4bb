/**
 * `petstore backup FILE` and `petstore restore FILE`, for a SQLite catalogue (PostgreSQL has tools of its own).
 *
 * A backup is a consistent snapshot of the whole database (pets, API keys, idempotency records, the migrations applied),
 * taken while servers keep serving and writing to it: SQLite's `VACUUM INTO` on a read-only connection, one read
 * transaction, so one committed state; in WAL mode neither the reader nor the server's writer waits for the other.
 *
 * A restore puts a snapshot in place of the database, with the service stopped: the snapshot must pass
 * `PRAGMA integrity_check`, a database that another process has open (a server) is refused, and the database's `-wal`
 * and `-shm` files, which belong to the old database, are removed before the copy is renamed over it.
 *
 * Either way the new file is put in place whole (`DurableFile.ts`).
 */
import { FileSystem } from "@effect/platform"
import { Database } from "bun:sqlite"
import { Clock, Effect, Option, Redacted, Schema } from "effect"
import { resolve } from "node:path"
import { CommandFailed } from "../CommandFailed.js"
import { cannotWrite, exists, isBusy, reasonOf, writeWhole } from "./DurableFile.js"
import { describeDatabase, isPostgresUrl } from "./Sql.js"
import { IN_MEMORY, readFailure, sqliteFile } from "./SqliteFile.js"

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
const sqliteFileOf = (command: "backup" | "restore", url: Redacted.Redacted<string>) =>
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
        (temporary) => Effect.zipRight(snapshotInto(db, temporary, path), keepOwnerAndMode(path, temporary)),
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
