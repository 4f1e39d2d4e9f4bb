/**
 * `petstore restore FILE`, for a SQLite catalogue (PostgreSQL has tools of its own).
 *
 * A restore puts a snapshot (`Backup.ts`) in place of the database, with the service stopped: the snapshot must pass
 * `PRAGMA integrity_check`, a database that another process has open (a server) is refused, and the database's `-wal`
 * and `-shm` files, which belong to the old database, are removed before the copy is renamed over it. The copy is put
 * in place whole (`DurableFile.ts`), and its feed gets an id of its own.
 */
import { FileSystem } from "@effect/platform"
import { Database } from "bun:sqlite"
import { Effect, Option, Redacted } from "effect"
import { resolve } from "node:path"
import { CommandFailed } from "../CommandFailed.js"
import { cannotWrite, exists, isBusy, reasonOf, writeWhole } from "./DurableFile.js"
import { newFeedId } from "./Migrations.js"
import { attempt, countPets, openCatalogue, snapshotInto, sqliteFileOf } from "./SqliteCatalogue.js"

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
