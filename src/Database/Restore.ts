/**
 * `petstore restore FILE`: puts a snapshot (as `petstore backup` writes it) in place of the SQLite database, with the
 * service stopped. The snapshot must pass `PRAGMA integrity_check`; a database that another process has open (a
 * server) is refused. The snapshot is copied beside the database and synced, the database's `-wal` and `-shm` files
 * (which belong to the old database) are removed, and the copy is renamed over the database.
 */
import { FileSystem } from "@effect/platform"
import { Database } from "bun:sqlite"
import { Effect, Option, type Redacted } from "effect"
import { resolve } from "node:path"
import { CommandFailed } from "../CommandFailed.js"
import { countPets, openCatalogue, snapshotInto, sqliteFileOf } from "./Backup.js"
import { cannotWrite, codeOf, exists, reasonOf, writeWhole } from "./DurableFile.js"
import { isBusy } from "./SqliteWriter.js"

/**
 * Fails when a process has `database` open. Every connection to a WAL database holds a lock on it while it is
 * open, so the exclusive lock that `locking_mode = EXCLUSIVE` takes at the first read is refused while one exists.
 */
const refuseWhileOpen = (database: string) =>
  Effect.try({
    try: () => {
      const db = new Database(database, { readwrite: true, create: false })
      try {
        for (
          const statement of ["PRAGMA busy_timeout = 0", "PRAGMA locking_mode = EXCLUSIVE", "BEGIN EXCLUSIVE", "COMMIT"]
        ) {
          db.run(statement)
        }
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
    Effect.try({
      try: () => db.query("PRAGMA integrity_check").all() as Array<{ integrity_check: string }>,
      catch: (error) => new CommandFailed({ message: `cannot check ${file}: ${reasonOf(error)}.` })
    }),
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
      fs.remove(file).pipe(Effect.catchAll((error) =>
        codeOf(error) === "ENOENT" ? Effect.void : new CommandFailed({
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
