/**
 * The one writer of a SQLite file: every write of the service is a unit of work handed to it. `bun:sqlite` is
 * synchronous, so a statement that waits (for another process's write lock, say) would hold the JavaScript thread and
 * every request with it. The writer never waits there: its connection has `busy_timeout = 0`, and while the database is
 * busy it tries again on a timer, backing off, until each unit's deadline (`DB_QUERY_TIMEOUT`; then a 503).
 *
 * Group commit: the units handed over in one turn of the event loop run in one transaction, each in a savepoint of its
 * own, so that a unit that throws is rolled back and fails alone. One COMMIT for all of them, and each unit succeeds
 * only once that commit is on disk (`SqliteWalSync.ts`): a 201 is never sent for a row that a crash could lose. A commit
 * (or its sync) that fails fails all of its units.
 *
 * Closing fails the units still queued, then waits for the syncs in flight: their units are answered before the WAL's
 * descriptor and the connection are closed.
 */
import { SqlError } from "@effect/sql"
import type { Database } from "bun:sqlite"
import { Context, Duration, Effect, Exit } from "effect"
import { isBusy } from "./DurableFile.js"
import { makeWalSync } from "./SqliteWalSync.js"

export interface Writer {
  /** The writer's connection, to prepare the statements of units on. Run them only inside a unit. */
  readonly database: Database
  /**
   * Runs `unit` in the next group commit and succeeds with its result once that commit is durable. Fails with a
   * `SqlError`: the unit threw (its statements rolled back), the database stayed busy past the deadline, or the commit
   * failed. Interrupted before its turn, the unit does not run.
   */
  readonly write: <A>(unit: () => A) => Effect.Effect<A, SqlError.SqlError>
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
  readonly unit: () => unknown
  readonly deadline: number
  readonly resume: (effect: Effect.Effect<unknown, SqlError.SqlError>) => void
  cancelled: boolean
}

const failedWith = (message: string) => (cause: unknown) => new SqlError.SqlError({ cause, message })
export const statementFailed = failedWith("Failed to execute statement")
const closedError = () => failedWith("The database is closed")(new Error("closed"))
const stayedBusy = failedWith("The database stayed busy past DB_QUERY_TIMEOUT")

/** The writer on a connection of its own (WAL already on); a unit waits for a busy database up to `timeout`. */
export const makeWriter = (
  database: Database,
  timeout: Duration.Duration
): Writer & { readonly close: Effect.Effect<void> } => {
  database.run("PRAGMA busy_timeout = 0")
  // A COMMIT returns without an fsync; the WAL is synced afterwards, off the thread, before any unit succeeds.
  database.run("PRAGMA synchronous = NORMAL")
  const walSync = makeWalSync(database.filename)
  const timeoutMs = Duration.toMillis(timeout)
  const prepare = (text: string) => database.prepare(text)
  const [begin, commit, rollback] = ["BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"].map(prepare)
  const [savepoint, release, rollbackUnit] = ["SAVEPOINT unit", "RELEASE unit", "ROLLBACK TO unit"].map(prepare)

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

  const failAll = (pending: ReadonlyArray<Pending>, error: SqlError.SqlError) => {
    for (const p of pending) if (!p.cancelled) p.resume(Effect.fail(error))
  }

  /** Fails the units whose deadline has passed; returns the time until the nearest remaining one. */
  const expire = (now: number): number => {
    let nearest = Infinity
    const kept: Array<Pending> = []
    for (const pending of queue) {
      if (pending.cancelled) continue
      if (pending.deadline > now) {
        kept.push(pending)
        nearest = Math.min(nearest, pending.deadline - now)
      } else {
        pending.resume(Effect.fail(stayedBusy(new Error("database is locked"))))
      }
    }
    queue = kept
    return nearest
  }

  /** Ends a transaction that cannot commit: rolled back, its locks released, its units failed. */
  const abandon = (batch: ReadonlyArray<Pending>, locked: ReadonlyArray<string>, error: SqlError.SqlError) => {
    settling = undefined
    settle(locked)
    try {
      if (database.inTransaction) rollback.run()
    } catch {
      // nothing more to undo
    }
    failAll(batch, error)
    if (queue.length > 0) schedule()
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
    const batch = queue
    queue = batch.length > MAX_BATCH ? batch.splice(MAX_BATCH) : []
    const results: Array<Exit.Exit<unknown, SqlError.SqlError>> = new Array(batch.length)
    const locked: Array<string> = []
    settling = locked
    for (let i = 0; i < batch.length; i++) {
      if (batch[i].cancelled) continue
      savepoint.run()
      try {
        results[i] = Exit.succeed(batch[i].unit())
        release.run()
      } catch (cause) {
        results[i] = Exit.fail(cause instanceof SqlError.SqlError ? cause : statementFailed(cause))
        // Some errors (a full disk, an I/O error) make SQLite roll the whole transaction back: then nothing of the
        // batch is stored, and the following units must not run outside it (a SAVEPOINT would start another one).
        try {
          if (!database.inTransaction) throw cause
          rollbackUnit.run()
          release.run()
        } catch (lost) {
          return abandon(batch, locked, failedWith("The transaction was rolled back")(lost))
        }
      }
    }
    settling = undefined
    try {
      commit.run()
    } catch (cause) {
      return abandon(batch, locked, failedWith("Failed to commit")(cause))
    }
    walSync.afterSync((error) => {
      settle(locked)
      if (error !== null) return failAll(batch, failedWith("Failed to sync the commit to disk")(error))
      for (let i = 0; i < batch.length; i++) if (results[i] !== undefined) batch[i].resume(results[i])
    })
    if (queue.length > 0) schedule()
  }

  const write = <A>(unit: () => A): Effect.Effect<A, SqlError.SqlError> =>
    Effect.async<A, SqlError.SqlError>((resume) => {
      if (closed) return resume(Effect.fail(closedError()))
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

  /** Fails the units still queued, waits for the syncs in flight (their units answered), then closes the connection. */
  const close = Effect.async<void>((resume) => {
    if (!closed) {
      closed = true
      if (retryTimer !== undefined) clearTimeout(retryTimer)
      failAll(queue.splice(0), closedError())
    }
    walSync.close(() => {
      database.close()
      resume(Effect.void)
    })
  })

  return { database, write, tryLock, close }
}
