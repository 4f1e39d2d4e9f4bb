/**
 * `petstore backup` and `petstore restore` on real files: the snapshot is the whole database and opens clean, nothing
 * is left beside it, an existing file is refused without --force, PostgreSQL is pointed to its own tools (exit 2),
 * a target that cannot be written or a database that cannot be read is one line (exit 1); a restore refuses a
 * database that a connection holds open and a snapshot that fails its integrity check. Then the command line's output
 * as scripts read it: the path alone on stdout, one note on stderr.
 */
import { BunContext } from "@effect/platform-bun"
import { describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { Effect, Redacted } from "effect"
import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { backup } from "../src/Database/Backup.js"
import { restore } from "../src/Database/Restore.js"
import { rows, tempDatabaseFile } from "./support/files.js"

const PETS = 250

const root = fileURLToPath(new URL("..", import.meta.url))

/** `petstore ARGS` run by Bun from the sources, with only the environment given. */
const petstore = (args: ReadonlyArray<string>, env: Record<string, string>) => {
  const result = spawnSync(process.execPath, ["src/main.ts", ...args], {
    cwd: root,
    encoding: "utf8",
    timeout: 30_000,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_FORMAT: "json", ...env }
  })
  return { status: result.status, stdout: result.stdout, stderr: result.stderr }
}

/**
 * A database file migrated by `petstore keys create` (one key, named "ci"), with `PETS` pets. Made by another process
 * and a connection closed here, so that no connection of this process holds it afterwards.
 */
const seeded = Effect.map(tempDatabaseFile, (file) => {
  const created = petstore(["keys", "create", "--name", "ci"], { DATABASE_URL: file })
  if (created.status !== 0) throw new Error(`keys create failed: ${created.stderr}`)
  const db = new Database(file)
  db.run(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${PETS})
     INSERT INTO pets (name, category_id, status) SELECT 'pet ' || i, 1, 'sold' FROM n`
  )
  db.close()
  return file
})

const run = <A, E>(effect: Effect.Effect<A, E, BunContext.BunContext>) => Effect.provide(effect, BunContext.layer)

const backupOf = (database: string, file: string, force = false) =>
  run(backup({ database: Redacted.make(database), file, force }))

const restoreOf = (database: string, file: string) => run(restore({ database: Redacted.make(database), file }))

describe("petstore backup", () => {
  it.scoped("writes the whole database, which opens clean, and leaves nothing else beside it", () =>
    Effect.gen(function*() {
      const database = yield* seeded
      const target = join(dirname(database), "snapshots", "backup.db")
      mkdirSync(dirname(target))
      const written = yield* backupOf(database, target)
      expect(written).toMatchObject({ path: target, database, pets: PETS })
      expect(written.bytes).toBeGreaterThan(0)
      expect(rows(target, "PRAGMA integrity_check")).toEqual([{ integrity_check: "ok" }])
      expect(rows(target, "SELECT count(*) AS n FROM pets")).toEqual([{ n: PETS }])
      expect(rows(target, "SELECT name FROM api_keys")).toEqual([{ name: "ci" }])
      expect(rows(target, "SELECT count(*) AS n FROM effect_sql_migrations")).toEqual(
        rows(database, "SELECT count(*) AS n FROM effect_sql_migrations")
      )
      expect(readdirSync(dirname(target))).toEqual(["backup.db"])
    }))

  it.scoped("refuses a FILE that exists unless --force, and leaves it as it was", () =>
    Effect.gen(function*() {
      const database = yield* seeded
      const target = join(dirname(database), "backup.db")
      writeFileSync(target, "precious")
      const refused = yield* Effect.flip(backupOf(database, target))
      expect(refused.message).toBe(`${target} exists; pass --force to replace it.`)
      expect(readFileSync(target, "utf8")).toBe("precious")
      yield* backupOf(database, target, true)
      expect(rows(target, "SELECT count(*) AS n FROM pets")).toEqual([{ n: PETS }])
    }))

  it.scoped("refuses the database itself and a directory as FILE", () =>
    Effect.gen(function*() {
      const database = yield* seeded
      expect((yield* Effect.flip(backupOf(database, database, true))).message).toContain("is the database itself")
      expect((yield* Effect.flip(backupOf(database, dirname(database), true))).message).toContain("is a directory")
    }))

  it.effect("points PostgreSQL to pg_dump, without the password, as a command that cannot be run (exit 2)", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(backupOf("postgres://me:s3cret@db.internal:5432/pets", "/tmp/x.db"))
      expect(error._tag).toBe("NotForPostgres")
      expect(error.message).toContain("pg_dump")
      expect(error.message).toContain("db.internal:5432/pets")
      expect(error.message).not.toContain("s3cret")
      expect(error.message).not.toContain("\n")
    }))

  it.scoped("says in one line why FILE cannot be written, and leaves no temporary file", () =>
    Effect.gen(function*() {
      const database = yield* seeded
      const directory = dirname(database)
      const missing = join(directory, "missing", "backup.db")
      expect((yield* Effect.flip(backupOf(database, missing))).message).toBe(
        `cannot write ${missing}: the directory ${dirname(missing)} does not exist.`
      )
      writeFileSync(join(directory, "plain"), "")
      const throughFile = join(directory, "plain", "backup.db")
      expect((yield* Effect.flip(backupOf(database, throughFile))).message).toBe(
        `cannot write ${throughFile}: a part of the path is not a directory.`
      )
      // Not even root creates files in /proc.
      expect((yield* Effect.flip(backupOf(database, "/proc/petstore-backup.db"))).message).toBe(
        "cannot write /proc/petstore-backup.db: no file can be created in /proc."
      )
      expect(readdirSync(directory).filter((name) => name.endsWith(".tmp"))).toEqual([])
    }))

  it.scoped("says in one line why the database cannot be read", () =>
    Effect.gen(function*() {
      const directory = dirname(yield* tempDatabaseFile)
      const target = join(directory, "backup.db")
      const absent = join(directory, "absent.db")
      expect((yield* Effect.flip(backupOf(absent, target))).message).toBe(
        `cannot read the database ${absent}: there is no such file (DATABASE_URL or --database names it).`
      )
      const junk = join(directory, "junk.db")
      writeFileSync(junk, "not a database ".repeat(100))
      expect((yield* Effect.flip(backupOf(junk, target))).message).toBe(
        `cannot read the database ${junk}: it is not a SQLite database.`
      )
      expect((yield* Effect.flip(backupOf(":memory:", target))).message).toContain("there is no file to back up")
      expect(existsSync(target)).toBe(false)
    }))
})

describe("petstore restore", () => {
  it.scoped("refuses while a connection holds the database, then puts the snapshot in place of it", () =>
    Effect.gen(function*() {
      const database = yield* seeded
      const snapshot = join(dirname(database), "snapshot.db")
      yield* backupOf(database, snapshot)
      const later = new Database(database)
      later.run("INSERT INTO pets (name, category_id, status) VALUES ('after the backup', 1, 'sold')")
      const refused = yield* Effect.flip(restoreOf(database, snapshot))
      expect(refused.message).toBe(
        `the database ${database} is open in another process (a server?): stop the service, then restore.`
      )
      later.close()
      writeFileSync(`${database}-wal`, "stale")
      const restored = yield* restoreOf(database, snapshot)
      expect(restored).toEqual({ path: database, snapshot, pets: PETS })
      expect(existsSync(`${database}-wal`)).toBe(false)
      expect(rows(database, "SELECT count(*) AS n FROM pets WHERE name = 'after the backup'")).toEqual([{ n: 0 }])
      expect(rows(database, "SELECT count(*) AS n FROM pets")).toEqual([{ n: PETS }])
      expect(rows(database, "PRAGMA integrity_check")).toEqual([{ integrity_check: "ok" }])
      // The restored catalogue's change feed is another one: the positions the old database handed out are gone.
      const [feed] = rows(database, "SELECT id FROM feed_meta") as Array<{ readonly id: string }>
      expect(feed.id).toMatch(/^[0-9a-f]{16}$/)
      expect(rows(snapshot, "SELECT id FROM feed_meta")).not.toEqual([feed])
    }))

  it.scoped("refuses a snapshot that fails its integrity check, or is no database, and keeps the database", () =>
    Effect.gen(function*() {
      const database = yield* seeded
      const snapshot = join(dirname(database), "snapshot.db")
      yield* backupOf(database, snapshot)
      // Every page after the first two overwritten: the tables' b-trees point at garbage.
      const bytes = readFileSync(snapshot)
      const pageSize = bytes.readUInt16BE(16)
      bytes.fill(0xa5, pageSize * 2)
      writeFileSync(snapshot, bytes)
      expect((yield* Effect.flip(restoreOf(database, snapshot))).message).toMatch(
        new RegExp(`^(${snapshot} fails PRAGMA integrity_check|cannot (check|read the snapshot) ${snapshot})`)
      )
      writeFileSync(snapshot, "not a database ".repeat(100))
      expect((yield* Effect.flip(restoreOf(database, snapshot))).message).toBe(
        `cannot read the snapshot ${snapshot}: it is not a SQLite database.`
      )
      expect(rows(database, "SELECT count(*) AS n FROM pets")).toEqual([{ n: PETS }])
      expect(readdirSync(dirname(database)).filter((name) => name.endsWith(".tmp"))).toEqual([])
    }))

  it.effect("points PostgreSQL to pg_restore (exit 2)", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(restoreOf("postgresql://me@db.internal/pets", "/tmp/x.db"))
      expect(error._tag).toBe("NotForPostgres")
      expect(error.message).toContain("pg_restore")
    }))
})

describe("petstore backup on the command line", { timeout: 60_000 }, () => {
  it.scoped("prints the path alone on stdout and one note on stderr; exit 1 and 2 with one line", () =>
    Effect.gen(function*() {
      const database = yield* seeded
      const target = join(dirname(database), "backup.db")
      const written = petstore(["backup", target], { DATABASE_URL: database })
      expect(written).toMatchObject({ status: 0, stdout: `${target}\n` })
      expect(statSync(target).mode & 0o777).toBe(0o600) // the keys' hashes are in it: its owner's alone
      expect(written.stderr).toMatch(
        new RegExp(`^Backed up ${database}: ${PETS} pets, [\\d.]+ kB, in [\\d.]+ m?s\\.\\n$`)
      )

      const again = petstore(["backup", target, "--database", database], {})
      expect(again).toEqual({
        status: 1,
        stdout: "",
        stderr: `petstore: ${target} exists; pass --force to replace it.\n`
      })
      expect(petstore(["backup", "--force", target, "--database", database], {})).toMatchObject({ status: 0 })

      const postgres = petstore(["backup", target], { DATABASE_URL: "postgres://me:pw@db.internal:5432/pets" })
      expect(postgres.status).toBe(2)
      expect(postgres.stdout).toBe("")
      expect(postgres.stderr).toMatch(/^petstore: backup copies a SQLite file, .*pg_dump.*\n$/)

      const unwritable = petstore(["backup", "/proc/petstore-backup.db"], { DATABASE_URL: database })
      expect(unwritable).toEqual({
        status: 1,
        stdout: "",
        stderr: "petstore: cannot write /proc/petstore-backup.db: no file can be created in /proc.\n"
      })
      expect(petstore(["backup"], { DATABASE_URL: database }).status).toBe(2)
    }))

  it.scoped("restore prints the database's path alone on stdout", () =>
    Effect.gen(function*() {
      const database = yield* seeded
      const snapshot = join(dirname(database), "snapshot.db")
      expect(petstore(["backup", snapshot], { DATABASE_URL: database }).status).toBe(0)
      const restored = petstore(["restore", snapshot], { DATABASE_URL: database })
      expect(restored, restored.stderr).toMatchObject({ status: 0, stdout: `${database}\n` })
      expect(restored.stderr).toBe(`Restored ${database} from ${snapshot}: ${PETS} pets. Start the service now.\n`)
    }))
})
