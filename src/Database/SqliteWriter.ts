/**
 * The one writer of a SQLite file: every write of the service (a new pet, `last used`, and whatever else must be
 * stored) is a unit of work handed to it. `bun:sqlite` is synchronous, so a statement that waits — for another
 * process's write lock, say — waits on the JavaScript thread, and every request with it. The writer never waits
 * there: its connection has `busy_timeout = 0`, and when the database is busy it tries again a little later (a timer,
 * backing off), until each unit's deadline (`DB_QUERY_TIMEOUT`), past which the unit fails (a 503 for its client).
 *
 * Group commit: the units handed over in one turn of the event loop run in one transaction, each in a savepoint of its
 * own, so that a unit that throws is rolled back and fails alone. One COMMIT for all of them, and each unit succeeds
 * only once that commit is on disk: the WAL is fsynced after the commit, off the JavaScript thread (`SqliteWalSync.ts`,
 * as durable as `synchronous = FULL`). So a 201 is never sent for a row that a crash could lose. A commit (or its
 * sync) that fails fails all of its units.
 */
import { SqlError } from "@effect/sql"
import { Database } from "bun:sqlite"
import { Context, Duration, Effect, Exit, Layer } from "effect"
import { makeWalSync } from "./SqliteWalSync.js"

/** A unit of work: statements (prepared on the writer's `database`) run inside the writer's transaction. */
export type Unit<A> = () => A

export interface Writer {
  /** The writer's connection, to prepare the statements of units on. Run them only inside a unit. */
  readonly database: Database
  /**
   * Runs `unit` in the next group commit and succeeds with its result once that commit is durable. Fails with a
   * `SqlError`: the unit threw (its statements rolled back; the `SqlError` it threw, or one whose `cause` is what it
   * threw), the database stayed busy past
   * the deadline (`DB_QUERY_TIMEOUT`), or the commit failed. Interrupted before its turn, the unit does not run.
   */
  readonly write: <A>(unit: Unit<A>) => Effect.Effect<A, SqlError.SqlError>
  /**
   * Inside a unit: takes the lock `name` until the unit's transaction is settled (its commit durable, or failed);
   * false when a unit of an unsettled transaction holds it. So what a unit writes under a lock is durable before
   * another unit reads it under that lock, as a transaction-scoped lock makes it on PostgreSQL.
   */
  readonly tryLock: (name: string) => boolean
}

/** The writer of the SQLite file; absent for PostgreSQL and for `:memory:`. */
export class SqliteWriter extends Context.Tag("Sql/SqliteWriter")<SqliteWriter, Writer>() {}

/** At most this many units per transaction, so that one commit does not hold the event loop for long. */
const MAX_BATCH = 512
/** The first wait for a busy database, doubled at each attempt up to the longest. */
const FIRST_RETRY_MS = 1
const LONGEST_RETRY_MS = 50

interface Pending {
  readonly unit: Unit<unknown>
  readonly deadline: number
  readonly resume: (effect: Effect.Effect<unknown, SqlError.SqlError>) => void
  cancelled: boolean
}

export const isBusy = (cause: unknown): boolean => {
  const code = (cause as { code?: unknown } | null)?.code
  return typeof code === "string" && (code === "SQLITE_BUSY" || code.startsWith("SQLITE_BUSY_"))
}

const failedWith = (message: string) => (cause: unknown) => new SqlError.SqlError({ cause, message })
const busyError = () => failedWith("The database stayed busy past DB_QUERY_TIMEOUT")(new Error("database is locked"))
const unitFailed = (cause: unknown) =>
  cause instanceof SqlError.SqlError ? cause : failedWith("Failed to execute statement")(cause)

/**
 * The writer on a connection of its own (opened by the caller, WAL already on). `timeout` bounds how long a unit waits
 * for a busy database.
 */
export const makeWriter = (database: Database, timeout: Duration.Duration): Writer & { readonly close: () => void } => {
  database.run("PRAGMA busy_timeout = 0")
  // A COMMIT returns without an fsync; the WAL is synced afterwards, off the thread, before any unit succeeds.
  database.run("PRAGMA synchronous = NORMAL")
  const walSync = makeWalSync(database.filename)
  const timeoutMs = Duration.toMillis(timeout)
  const begin = database.prepare("BEGIN IMMEDIATE")
  const commit = database.prepare("COMMIT")
  const rollback = database.prepare("ROLLBACK")
  const savepoint = database.prepare("SAVEPOINT unit")
  const release = database.prepare("RELEASE unit")
  const rollbackUnit = database.prepare("ROLLBACK TO unit")

  let queue: Array<Pending> = []
  let scheduled = false
  let retryTimer: ReturnType<typeof setTimeout> | undefined
  let retryMs = FIRST_RETRY_MS
  let closed = false
  /** The locks taken by the units of the transaction running now, released when it settles. */
  let settling: Array<string> | undefined
  const locks = new Set<string>()
  const tryLock = (name: string) => {
    if (settling === undefined) throw new Error("tryLock is only called inside a unit")
    if (locks.has(name)) return false
    locks.add(name)
    settling.push(name)
    return true
  }
  const settle = (names: ReadonlyArray<string>) => {
    for (const name of names) locks.delete(name)
  }

  const schedule = () => {
    if (scheduled || retryTimer !== undefined) return
    scheduled = true
    setImmediate(flush)
  }

  /** Fails the units whose deadline has passed; returns the time until the nearest remaining one. */
  const expire = (now: number): number => {
    let nearest = Infinity
    const kept: Array<Pending> = []
    for (const pending of queue) {
      if (pending.cancelled) continue
      if (pending.deadline <= now) pending.resume(Effect.fail(busyError()))
      else {
        kept.push(pending)
        nearest = Math.min(nearest, pending.deadline - now)
      }
    }
    queue = kept
    return nearest
  }

  const flush = () => {
    scheduled = false
    retryTimer = undefined
    if (closed) return
    const untilDeadline = expire(Date.now())
    if (queue.length === 0) return
    try {
      begin.run()
    } catch (cause) {
      if (!isBusy(cause)) return failAll(queue.splice(0), failedWith("Failed to begin a transaction")(cause))
      // Another connection writes: try again later, without holding the event loop meanwhile.
      retryTimer = setTimeout(flush, Math.max(1, Math.min(retryMs, untilDeadline)))
      retryMs = Math.min(retryMs * 2, LONGEST_RETRY_MS)
      return
    }
    retryMs = FIRST_RETRY_MS
    const batch = queue.length <= MAX_BATCH ? queue : queue.slice(0, MAX_BATCH)
    queue = queue.length <= MAX_BATCH ? [] : queue.slice(MAX_BATCH)
    const results: Array<Exit.Exit<unknown, SqlError.SqlError>> = new Array(batch.length)
    const settled: Array<string> = []
    settling = settled
    for (let i = 0; i < batch.length; i++) {
      if (batch[i].cancelled) continue
      savepoint.run()
      try {
        results[i] = Exit.succeed(batch[i].unit())
        release.run()
      } catch (cause) {
        results[i] = Exit.fail(unitFailed(cause))
        // Some errors (a full disk, an I/O error) make SQLite roll the whole transaction back: then nothing of the
        // batch is stored, and the following units must not run outside it (a SAVEPOINT would start another one).
        try {
          if (!database.inTransaction) throw cause
          rollbackUnit.run()
          release.run()
        } catch (lost) {
          settling = undefined
          settle(settled) // first: whatever the ROLLBACK below does, the transaction is over
          if (database.inTransaction) rollback.run()
          failAll(batch, failedWith("The transaction was rolled back")(lost))
          if (queue.length > 0) schedule()
          return
        }
      }
    }
    settling = undefined
    try {
      commit.run()
    } catch (cause) {
      if (database.inTransaction) {
        try {
          rollback.run()
        } catch {
          // nothing more to undo
        }
      }
      settle(settled)
      failAll(batch, failedWith("Failed to commit")(cause))
      if (queue.length > 0) schedule()
      return
    }
    walSync.afterSync((error) => {
      settle(settled)
      if (error !== null) return failAll(batch, failedWith("Failed to sync the commit to disk")(error))
      for (let i = 0; i < batch.length; i++) if (results[i] !== undefined) batch[i].resume(results[i])
    })
    if (queue.length > 0) schedule()
  }

  const failAll = (pending: ReadonlyArray<Pending>, error: SqlError.SqlError) => {
    for (const p of pending) if (!p.cancelled) p.resume(Effect.fail(error))
  }

  const write = <A>(unit: Unit<A>): Effect.Effect<A, SqlError.SqlError> =>
    Effect.async<A, SqlError.SqlError>((resume) => {
      if (closed) return resume(Effect.fail(failedWith("The database is closed")(new Error("closed"))))
      const pending: Pending = {
        unit,
        deadline: Date.now() + timeoutMs,
        resume: resume as Pending["resume"],
        cancelled: false
      }
      queue.push(pending)
      schedule()
      return Effect.sync(() => {
        pending.cancelled = true
      })
    })

  const close = () => {
    closed = true
    if (retryTimer !== undefined) clearTimeout(retryTimer)
    failAll(queue.splice(0), failedWith("The database is closed")(new Error("closed")))
    walSync.close()
  }

  return { database, write, tryLock, close }
}

/**
 * The writer on its own connection to `filename` (which has its tables and WAL already), closed with the layer after
 * the units still queued have failed.
 */
export const layer = (filename: string, timeout: Duration.Duration): Layer.Layer<SqliteWriter, SqlError.SqlError> =>
  Layer.scoped(
    SqliteWriter,
    Effect.acquireRelease(
      Effect.try({
        try: () => makeWriter(new Database(filename, { readwrite: true, create: false }), timeout),
        catch: failedWith(`Failed to open ${filename}`)
      }),
      (writer) =>
        Effect.sync(() => {
          writer.close()
          writer.database.close()
        })
    )
  )
