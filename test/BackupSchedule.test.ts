/**
 * The backups a server takes of itself (`BACKUP_EVERY`): their names sort by time; the copy made in steps holds what
 * `VACUUM INTO` holds; the oldest beyond `BACKUP_KEEP` go only once a new one is written, and a failed backup is counted
 * and logged with its reason while the backups already there stay; interrupted, a backup leaves no partial file. The
 * settings are checked (`BACKUP_KEEP`, PostgreSQL and `:memory:` refused in one line, exit 1).
 */
import { BunContext } from "@effect/platform-bun"
import { describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { ConfigProvider, Duration, Effect, Fiber, Logger, Metric, Option, Redacted } from "effect"
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { backup } from "../src/Database/Backup.js"
import {
  backupName,
  backupOnce,
  type BackupSchedule,
  BackupScheduleConfig,
  runBackups,
  startedAt
} from "../src/Database/ScheduledBackups.js"
import { backupFailures, backupLastSuccess } from "../src/Observability/Metrics.js"
import { spawnPetstore } from "./support/cli.js"
import { rows, tempDatabaseFile } from "./support/files.js"

const PETS = 300

/** A database migrated by `petstore keys create`, with `PETS` pets, the newest of them deleted again. */
const seeded = Effect.gen(function*() {
  const file = yield* tempDatabaseFile
  const created = yield* spawnPetstore(file, ["keys", "create", "--name", "ci"], {})
  if (created.status !== 0) throw new Error(`keys create failed: ${created.stderr}`)
  const db = new Database(file)
  db.run(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${PETS + 1})
     INSERT INTO pets (name, category_id, status) SELECT 'pet ' || i, 1 + i % 7, 'pending' FROM n`
  )
  // The AUTOINCREMENT counter is now above the largest id: a copy must keep it, or an id would be handed out twice.
  db.run(`DELETE FROM pets WHERE id = ${PETS + 1}`)
  db.close()
  return file
})

const run = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, BunContext.layer)

/** Everything in the file a backup should carry: schema, rows of every table, counters, header fields. */
const contents = (file: string) => ({
  schema: rows(file, "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"),
  pets: rows(file, "SELECT * FROM pets ORDER BY id"),
  keys: rows(file, "SELECT * FROM api_keys ORDER BY id"),
  migrations: rows(file, "SELECT * FROM effect_sql_migrations ORDER BY migration_id"),
  sequence: rows(file, "SELECT * FROM sqlite_sequence ORDER BY name"),
  header: rows(file, "SELECT * FROM pragma_user_version, pragma_application_id, pragma_page_size")
})

const failures = Effect.map(Metric.value(backupFailures), (state) => state.count)

const scheduleFor = (database: string, keep: number, directory = join(dirname(database), "backups")) =>
  ({ database, directory, keep, every: Duration.hours(1) }) satisfies BackupSchedule

const configFrom = (database: string, env: Record<string, string>) =>
  BackupScheduleConfig(Redacted.make(database)).pipe(
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))
  )

describe("a scheduled backup's name", () => {
  it("is petstore- and the UTC time it started, to the millisecond, and sorts by time", () => {
    const at = Date.UTC(2026, 10, 28, 3, 15, 0, 123)
    expect(backupName(at)).toBe("petstore-20261128T031500.123Z.db")
    expect(startedAt(backupName(at))).toEqual(Option.some(at))
    const times = [at, at + 1, at + 999, at + 1000, at + 3_600_000, Date.UTC(2027, 0, 1)]
    const names = times.map(backupName)
    expect([...names].reverse().sort()).toEqual(names)
    for (const other of ["petstore.db", "petstore-latest.db", ".petstore-20261128T031500.123Z.db.ab12.tmp"]) {
      expect(startedAt(other)).toEqual(Option.none())
    }
  })
})

describe("the copy made in steps", () => {
  it.scoped("holds what VACUUM INTO holds: the schema, every row, the AUTOINCREMENT counter, the header", () =>
    Effect.gen(function*() {
      const database = yield* seeded
      const stepwise = join(dirname(database), "stepwise.db")
      const vacuumed = join(dirname(database), "vacuumed.db")
      const written = yield* run(backup({
        database: Redacted.make(database),
        file: stepwise,
        force: false,
        pace: { rows: 7, pause: Duration.zero }
      }))
      yield* run(backup({ database: Redacted.make(database), file: vacuumed, force: false }))
      expect(written.pets).toBe(PETS)
      expect(rows(stepwise, "PRAGMA integrity_check")).toEqual([{ integrity_check: "ok" }])
      expect(contents(stepwise)).toEqual(contents(vacuumed))
      expect(contents(stepwise)).toEqual(contents(database))
      expect(rows(stepwise, "SELECT seq FROM sqlite_sequence WHERE name = 'pets'")).toEqual([{ seq: PETS + 1 }])
    }))

  it.scopedLive("interrupted midway, leaves no file behind", () =>
    Effect.gen(function*() {
      const database = yield* seeded
      const directory = join(dirname(database), "backups")
      mkdirSync(directory)
      const target = join(directory, "backup.db")
      const copying = yield* Effect.fork(run(backup({
        database: Redacted.make(database),
        file: target,
        force: false,
        pace: { rows: 5, pause: Duration.millis(20) }
      })))
      // Some steps in (the whole copy takes 60 steps, more than a second).
      yield* Effect.sleep(Duration.millis(250))
      expect(readdirSync(directory).filter((name) => name.endsWith(".tmp"))).toHaveLength(1)
      yield* Fiber.interrupt(copying)
      expect(readdirSync(directory)).toEqual([])
    }))
})

describe("scheduled backups", () => {
  it.scopedLive("keep BACKUP_KEEP, removing the oldest only once a new one is written, and no other file", () =>
    Effect.gen(function*() {
      const database = yield* seeded
      const schedule = scheduleFor(database, 2)
      mkdirSync(schedule.directory)
      writeFileSync(join(schedule.directory, "notes.txt"), "mine")
      const names: Array<string> = []
      for (let i = 0; i < 4; i++) {
        const written = yield* run(backupOnce(schedule))
        names.push(written.path.slice(schedule.directory.length + 1))
        expect(written.removed).toEqual(i < 2 ? [] : [names[i - 2]])
        yield* Effect.sleep(Duration.millis(2))
      }
      expect(readdirSync(schedule.directory).sort()).toEqual([...names.slice(2), "notes.txt"].sort())
      for (const name of names.slice(2)) {
        expect(rows(join(schedule.directory, name), "PRAGMA integrity_check")).toEqual([{ integrity_check: "ok" }])
        expect(rows(join(schedule.directory, name), "SELECT count(*) AS n FROM pets")).toEqual([{ n: PETS }])
        // The keys' hashes are in it: its owner's alone, whatever the umask lets others read.
        expect(statSync(join(schedule.directory, name)).mode & 0o777).toBe(0o600)
      }

      // A backup that fails removes nothing: the two there stay, though the directory is full.
      const failing = { ...schedule, database: join(dirname(database), "gone.db") }
      const failure = yield* Effect.flip(run(backupOnce(failing)))
      expect(failure.message).toContain("there is no such file")
      expect(readdirSync(schedule.directory).sort()).toEqual([...names.slice(2), "notes.txt"].sort())
    }))

  it.scopedLive("count a failure, log it once with its reason, keep the backups there and try again next period", () =>
    Effect.gen(function*() {
      const database = yield* seeded
      const schedule = { ...scheduleFor(database, 3), every: Duration.millis(100) }
      yield* run(backupOnce(schedule))
      const kept = readdirSync(schedule.directory)
      expect(kept).toHaveLength(1)
      const lastSuccess = (yield* Metric.value(backupLastSuccess)).value

      // The database goes away: every backup from now on fails.
      const failing = { ...schedule, database: join(dirname(database), "gone.db") }
      const logged: Array<{ message: unknown; level: string; reason: unknown }> = []
      const capture = Logger.make(({ annotations, logLevel, message }) => {
        const reason = [...annotations].find(([key]) => key === "reason")?.[1]
        logged.push({ message: Array.isArray(message) ? message[0] : message, level: logLevel.label, reason })
      })
      const before = yield* failures
      // The first is due one period after the newest there; then one each period, until the scope closes.
      yield* Effect.scoped(Effect.zipRight(run(runBackups(failing)), Effect.sleep(Duration.millis(450)))).pipe(
        Effect.provide(Logger.replace(Logger.defaultLogger, capture))
      )
      const failed = (yield* failures) - before
      expect(failed).toBeGreaterThanOrEqual(2)
      const lines = logged.filter((line) => line.message === "backup failed")
      expect(lines).toHaveLength(failed)
      expect(lines[0]).toEqual({
        message: "backup failed",
        level: "ERROR",
        reason:
          `cannot read the database ${failing.database}: there is no such file (DATABASE_URL or --database names it).`
      })
      expect(readdirSync(schedule.directory)).toEqual(kept)
      // At start the last success is the newest backup's time; no failure moves it.
      expect((yield* Metric.value(backupLastSuccess)).value).toBe(startedAt(kept[0]).pipe(Option.getOrThrow) / 1000)
      expect(lastSuccess).toBeGreaterThan(0)
    }))

  it.scopedLive("count a BACKUP_DIR that cannot be created, saying why", () =>
    Effect.gen(function*() {
      const database = yield* seeded
      const file = join(dirname(database), "a-file")
      writeFileSync(file, "")
      const schedule = scheduleFor(database, 3, join(file, "backups"))
      const failure = yield* Effect.flip(run(backupOnce(schedule)))
      expect(failure.message).toBe(
        `cannot create the directory ${schedule.directory}: a part of the path is not a directory.`
      )
      expect(existsSync(schedule.directory)).toBe(false)
    }))
})

describe("the backup settings", () => {
  it.effect("are off unless BACKUP_EVERY is set, and read BACKUP_DIR and BACKUP_KEEP only then", () =>
    Effect.gen(function*() {
      expect(yield* configFrom("/data/petstore.db", { BACKUP_KEEP: "none" })).toEqual(Option.none())
      expect(yield* configFrom("/data/petstore.db", { BACKUP_EVERY: "0" })).toEqual(Option.none())
      expect(yield* configFrom("/data/petstore.db", { BACKUP_EVERY: "1h" })).toEqual(Option.some({
        database: "/data/petstore.db",
        directory: "/data/backups",
        every: Duration.hours(1),
        keep: 7
      }))
      expect(yield* configFrom("/data/petstore.db", { BACKUP_EVERY: "30 minutes", BACKUP_DIR: "/b", BACKUP_KEEP: "2" }))
        .toEqual(Option.some({ database: "/data/petstore.db", directory: "/b", every: Duration.minutes(30), keep: 2 }))
    }))

  it.effect("refuse a BACKUP_KEEP that is not a positive integer, saying what they got and what they expect", () =>
    Effect.gen(function*() {
      for (const keep of ["0", "-1", "2.5", "seven", ""]) {
        const error = yield* Effect.flip(configFrom("/data/petstore.db", { BACKUP_EVERY: "1h", BACKUP_KEEP: keep }))
        expect(error.toString()).toContain(
          `BACKUP_KEEP must be a positive integer, the number of backups to keep, such as 7 (got ${
            JSON.stringify(keep)
          })`
        )
      }
    }))

  it.effect("refuse BACKUP_EVERY with PostgreSQL (pg_dump's job) and with :memory:, in one line", () =>
    Effect.gen(function*() {
      const postgres = yield* Effect.flip(
        configFrom("postgres://me:s3cret@db.internal:5432/pets", { BACKUP_EVERY: "1h" })
      )
      expect(postgres.toString()).toContain("BACKUP_EVERY is set, but backup copies a SQLite file")
      expect(postgres.toString()).toContain("pg_dump")
      expect(postgres.toString()).not.toContain("s3cret")
      const memory = yield* Effect.flip(configFrom(":memory:", { BACKUP_EVERY: "1h" }))
      expect(memory.toString()).toContain("there is no file to back up")
    }))

  it.scoped("with PostgreSQL, stop the server at start with one line, exit 1", () =>
    Effect.gen(function*() {
      const started = yield* spawnPetstore("postgres://me:s3cret@db.internal:5432/pets", ["serve"], {
        BACKUP_EVERY: "1h"
      })
      expect(started.status).toBe(1)
      expect(started.stdout).toBe("")
      expect(started.stderr).toMatch(/^petstore: BACKUP_EVERY is set, but .*pg_dump.* Unset BACKUP_EVERY\.\n$/)
      expect(started.stderr).not.toContain("s3cret")
    }))
})
