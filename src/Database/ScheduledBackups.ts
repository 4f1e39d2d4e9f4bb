/**
 * Backups a SQLite server takes of itself (`BACKUP_EVERY`): the snapshot `petstore backup` takes (`Backup.ts`), copied
 * in steps so that requests keep being served, into `BACKUP_DIR` under a name that sorts by time; once the new file is
 * durable, the oldest beyond `BACKUP_KEEP` are removed. One at a time, in a fiber of the server's scope: interrupted at
 * the drain, a backup in progress leaves no partial file. A failure is logged with its reason and counted; the backups
 * already written stay, and the next period tries again. PostgreSQL is backed up by its own tools, and refused here.
 */
import { FileSystem } from "@effect/platform"
import { BunFileSystem } from "@effect/platform-bun"
import { Clock, Config, ConfigError, Duration, Effect, Either, Layer, Metric, Option, Redacted, Schedule } from "effect"
import { dirname, join, resolve } from "node:path"
import { CommandFailed } from "../CommandFailed.js"
import { BackupEvery, positiveInteger, variable } from "../Config.js"
import { backupDuration, backupFailures, backupLastSuccess } from "../Observability/Metrics.js"
import { backup, type Pace } from "./Backup.js"
import { reasonOf } from "./DurableFile.js"
import { sqliteFileOf } from "./SqliteCatalogue.js"

/**
 * How a scheduled backup copies: steps of 1000 rows, 5 ms apart. On a catalogue of a million pets under create load, a
 * step takes 3.5 ms (median), about 100 ms at worst on a busy 2-core machine, where one `VACUUM INTO` takes 0.4 to 1 s
 * (`bench/results/2026-11-28-scheduled-backups.md`).
 */
export const SCHEDULED_PACE: Pace = { rows: 1000, pause: Duration.millis(5) }

/** `BACKUP_KEEP`: how many backups are kept. */
export const BackupKeep = positiveInteger("BACKUP_KEEP", "the number of backups to keep, such as 7").pipe(
  Config.withDefault(7)
)

/** `BACKUP_DIR`: where backups are written; by default `backups` beside the database file. */
const BackupDir = variable(
  "BACKUP_DIR",
  (text) => text === "" ? Either.left("must name a directory, such as /var/backups/petstore") : Either.right(text)
).pipe(Config.option)

export interface BackupSchedule {
  /** The database file, absolute. */
  readonly database: string
  /** Where the backups go, absolute. */
  readonly directory: string
  readonly every: Duration.Duration
  readonly keep: number
}

/** A backup's name: `petstore-` and the UTC time it started, to the millisecond: `petstore-20261128T031500.123Z.db`. */
export const backupName = (millis: number): string =>
  `petstore-${new Date(millis).toISOString().replace(/[-:]/g, "")}.db`

const NAME = /^petstore-(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})\.(\d{3})Z\.db$/

/** When the backup named `name` started (milliseconds since the epoch), or none for another file. */
export const startedAt = (name: string): Option.Option<number> => {
  const match = NAME.exec(name)
  if (match === null) return Option.none()
  const [year, month, day, hour, minute, second, millis] = match.slice(1).map(Number)
  return Option.some(Date.UTC(year, month - 1, day, hour, minute, second, millis))
}

/**
 * The schedule `BACKUP_EVERY`, `BACKUP_DIR` and `BACKUP_KEEP` describe for the database `url` names; none when
 * `BACKUP_EVERY` is unset (the other two are then not read). A database without a file to copy (PostgreSQL,
 * `:memory:`) is refused in one line naming `BACKUP_EVERY`.
 */
export const BackupScheduleConfig = (url: Redacted.Redacted<string>) =>
  Effect.flatMap(BackupEvery, (every) =>
    Option.match(every, {
      onNone: () => Effect.succeedNone,
      onSome: (every) =>
        Effect.gen(function*() {
          const database = yield* sqliteFileOf("backup", url).pipe(
            Effect.mapError((refused) =>
              ConfigError.InvalidData(
                ["BACKUP_EVERY"],
                `BACKUP_EVERY is set, but ${refused.message} Unset BACKUP_EVERY.`
              )
            ),
            Effect.provide(BunFileSystem.layer)
          )
          const directory = resolve(Option.getOrElse(yield* BackupDir, () => join(dirname(database), "backups")))
          return Option.some<BackupSchedule>({ database, directory, every, keep: yield* BackupKeep })
        })
    }))

/** The backups in `directory`, by name, oldest first; other files are left out. */
const backupsIn = (directory: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readDirectory(directory)).pipe(
    Effect.map((names) => names.filter((name) => Option.isSome(startedAt(name))).sort())
  )

/** Removes the oldest backups beyond `keep`; answers their names. A file that cannot be removed is logged and kept. */
const removeBeyond = (directory: string, keep: number) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const names = yield* backupsIn(directory)
    const removed: Array<string> = []
    for (const name of names.slice(0, Math.max(0, names.length - keep))) {
      yield* fs.remove(join(directory, name)).pipe(
        Effect.tap(() => removed.push(name)),
        Effect.catchAll((error) =>
          Effect.logWarning("an old backup cannot be removed").pipe(
            Effect.annotateLogs({ file: join(directory, name), reason: reasonOf(error) })
          )
        )
      )
    }
    return removed
  })

/**
 * One backup: written whole and synced with its directory (`writeWhole`), then the oldest beyond `keep` removed.
 * Fails with the reason, as `petstore backup` says it; the files already there are left as they were.
 */
export const backupOnce = (schedule: BackupSchedule) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const started = yield* Clock.currentTimeMillis
    const file = join(schedule.directory, backupName(started))
    yield* fs.makeDirectory(schedule.directory, { recursive: true }).pipe(
      Effect.mapError((error) =>
        new CommandFailed({ message: `cannot create the directory ${schedule.directory}: ${reasonOf(error)}.` })
      )
    )
    const written = yield* backup({
      database: Redacted.make(schedule.database),
      file,
      force: false,
      pace: SCHEDULED_PACE
    })
    const finished = yield* Clock.currentTimeMillis
    yield* Metric.set(backupLastSuccess, finished / 1000)
    yield* Metric.set(backupDuration, written.millis / 1000)
    const removed = yield* removeBeyond(schedule.directory, schedule.keep).pipe(
      Effect.catchAll((error) =>
        Effect.as(
          Effect.logWarning("old backups cannot be listed").pipe(
            Effect.annotateLogs({ directory: schedule.directory, reason: reasonOf(error) })
          ),
          []
        )
      )
    )
    yield* Effect.logInfo("backup written").pipe(Effect.annotateLogs({
      file,
      pets: written.pets,
      bytes: written.bytes,
      durationMs: written.millis,
      ...(removed.length > 0 ? { removed } : {})
    }))
    return { ...written, removed }
  })

/** `backupOnce`, a failure counted and logged once with its reason (both or neither) instead of failing. */
const backupOrCount = (schedule: BackupSchedule) =>
  backupOnce(schedule).pipe(
    Effect.catchAll((error) => Effect.succeed(error.message)),
    Effect.catchAllDefect((defect) => Effect.succeed(reasonOf(defect))),
    Effect.flatMap((outcome) =>
      typeof outcome === "string"
        ? Effect.uninterruptible(Effect.zipRight(
          Metric.increment(backupFailures),
          Effect.logError("backup failed").pipe(Effect.annotateLogs({ directory: schedule.directory, reason: outcome }))
        ))
        : Effect.void
    )
  )

/**
 * Takes a backup every `schedule.every` for the life of the scope, in a fiber of its own. The first is due one period
 * after the newest in the directory (at once if there is none; within one period if the newest seems to come from the
 * future, a clock set back), so that restarts neither skip backups nor pile them up.
 */
export const runBackups = (schedule: BackupSchedule) =>
  Effect.gen(function*() {
    yield* Metric.incrementBy(backupFailures, 0)
    const newest = yield* backupsIn(schedule.directory).pipe(
      Effect.map((names) => Option.flatMap(Option.fromNullable(names.at(-1)), startedAt)),
      Effect.orElseSucceed(() => Option.none<number>())
    )
    yield* Metric.set(backupLastSuccess, Option.getOrElse(Option.map(newest, (millis) => millis / 1000), () => 0))
    const now = yield* Clock.currentTimeMillis
    const wait = Option.match(newest, {
      onNone: () => 0,
      onSome: (millis) =>
        Math.max(0, Math.min(millis + Duration.toMillis(schedule.every) - now, Duration.toMillis(schedule.every)))
    })
    yield* Effect.logInfo("backups are scheduled").pipe(Effect.annotateLogs({
      directory: schedule.directory,
      every: Duration.format(schedule.every),
      keep: schedule.keep,
      next: new Date(now + wait).toISOString()
    }))
    yield* backupOrCount(schedule).pipe(
      Effect.repeat(Schedule.fixed(schedule.every)),
      Effect.delay(Duration.millis(wait)),
      Effect.forkScoped
    )
  })

/** The scheduled backups, for as long as the layer's scope is open; nothing when there is no schedule. */
export const ScheduledBackupsLive = (schedule: Option.Option<BackupSchedule>) =>
  Option.match(schedule, {
    onNone: () => Layer.empty,
    onSome: (schedule) => Layer.scopedDiscard(runBackups(schedule)).pipe(Layer.provide(BunFileSystem.layer))
  })
