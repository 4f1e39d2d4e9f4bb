/**
 * The one writer of a SQLite file: every write of the service is a unit of work handed to it. `bun:sqlite` is
 * synchronous, so a statement that waits (for another process's write lock, say) would hold the JavaScript thread and
 * every request with it. The writer never waits there: its connection has `busy_timeout = 0`, and while the database is
 * busy it tries again on a timer, backing off, until each unit's deadline (`DB_QUERY_TIMEOUT`; then a 503).
 *
 * Group commit: the units handed over in one turn of the event loop run in one transaction, each in a savepoint of its
 * own, so that a unit that throws is rolled back and fails alone. One COMMIT for all of them, and each unit succeeds
 * only once that commit is on disk (`SqliteWalSync.ts`): a 201 is never sent for a row that a crash could lose. A
 * commit (or its sync) that fails fails all of its units (a unit that failed on its own keeps its own failure).
 *
 * A unit that goes on asynchronously (a transaction's body that waits, `Statements.ts`) holds the transaction open
 * until it ends, up to its deadline; the units handed over meanwhile wait for the next commit.
 *
 * Closing fails the units still queued and rolls back a held one, then waits for the syncs in flight: their units
 * are answered before the WAL's descriptor and the connection are closed.
 */
import { SqlError } from "@effect/sql"
import type { Database } from "bun:sqlite"
import { Context, Duration, Effect, Exit, FiberId } from "effect"
import { isBusy } from "./DurableFile.js"
import { type Held, holdFor } from "./SqliteHold.js"
import {
  closedError,
  type Continuing,
  expire,
  failAll,
  failedWith,
  isContinuing,
  type Outcome,
  type Pending,
  statementFailed,
  type Turn,
  type Writer
} from "./SqliteUnits.js"
import { makeWalSync } from "./SqliteWalSync.js"

/** The writer of the SQLite file; absent for PostgreSQL and for `:memory:`. */
export class SqliteWriter extends Context.Tag("Sql/SqliteWriter")<SqliteWriter, Writer>() {}

/** At most this many units per transaction, so that one commit does not hold the event loop for long. */
const MAX_BATCH = 512
/** The first wait for a busy database, doubled at each attempt up to the longest. */
const FIRST_RETRY_MS = 1
const LONGEST_RETRY_MS = 50

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
  /** The unit whose transaction is held open while it goes on; no other unit runs meanwhile. */
  let held: Held | undefined
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
    if (scheduled || retryTimer !== undefined || held !== undefined) return
    scheduled = true
    setImmediate(flush)
  }

  /** Ends a transaction that cannot commit: rolled back, its locks released, its units failed. */
  const abandon = (turn: Turn, error: SqlError.SqlError) => {
    settling = undefined
    settle(turn.locked)
    try {
      if (database.inTransaction) rollback.run()
    } catch {
      // nothing more to undo
    }
    failAll(turn, error)
    if (queue.length > 0) schedule()
  }

  const flush = () => {
    scheduled = false
    retryTimer = undefined
    if (closed) return
    const { kept, nearest: untilDeadline } = expire(queue, Date.now())
    queue = kept
    if (queue.length === 0) return
    try {
      begin.run()
    } catch (cause) {
      if (!isBusy(cause)) {
        return failAll(
          { batch: queue.splice(0), outcomes: [], locked: [] },
          failedWith("Failed to begin a transaction")(cause)
        )
      }
      // Another connection writes: try again later, without holding the event loop meanwhile.
      retryTimer = setTimeout(flush, Math.max(1, Math.min(retryMs, untilDeadline)))
      retryMs = Math.min(retryMs * 2, LONGEST_RETRY_MS)
      return
    }
    retryMs = FIRST_RETRY_MS
    const batch = queue
    queue = batch.length > MAX_BATCH ? batch.splice(MAX_BATCH) : []
    const turn: Turn = { batch, outcomes: new Array(batch.length), locked: [] }
    settling = turn.locked
    proceed(turn, 0)
  }

  /** Runs the units of the turn from `from` on, each in its savepoint, then commits them. */
  const proceed = (turn: Turn, from: number) => {
    const { batch } = turn
    for (let i = from; i < batch.length; i++) {
      if (batch[i].cancelled) continue
      savepoint.run()
      let outcome: Outcome | Continuing<unknown, unknown>
      try {
        outcome = batch[i].unit()
      } catch (cause) {
        outcome = Exit.fail(cause instanceof SqlError.SqlError ? cause : statementFailed(cause))
      }
      if (isContinuing(outcome)) return hold(turn, i, outcome)
      if (!endUnit(turn, i, outcome)) return
    }
    settling = undefined
    try {
      commit.run()
    } catch (cause) {
      return abandon(turn, failedWith("Failed to commit")(cause))
    }
    walSync.afterSync((error) => {
      settle(turn.locked)
      if (error !== null) return failAll(turn, failedWith("Failed to sync the commit to disk")(error))
      for (let i = 0; i < batch.length; i++) {
        const outcome = turn.outcomes[i]
        if (outcome !== undefined && !batch[i].cancelled) batch[i].resume(outcome)
      }
    })
    if (queue.length > 0) schedule()
  }

  /**
   * Ends unit `i` of the turn with its outcome: its savepoint released, or rolled back when it failed. False when the
   * transaction is lost (then abandoned): some errors (a full disk, an I/O error) make SQLite roll the whole
   * transaction back, nothing of the batch is stored, and the following units must not run outside it (a SAVEPOINT
   * would start another one).
   */
  const endUnit = (turn: Turn, i: number, outcome: Outcome): boolean => {
    if (Exit.isSuccess(outcome)) {
      try {
        release.run()
        turn.outcomes[i] = outcome
        return true
      } catch (cause) {
        outcome = Exit.fail(statementFailed(cause))
      }
    }
    turn.outcomes[i] = outcome
    try {
      if (!database.inTransaction) throw new Error("SQLite rolled the transaction back")
      rollbackUnit.run()
      release.run()
      return true
    } catch (lost) {
      abandon(turn, failedWith("The transaction was rolled back")(lost))
      return false
    }
  }

  /** Holds the turn's transaction open for unit `i`, which goes on (`SqliteHold.ts`). */
  const hold = (turn: Turn, i: number, unit: Continuing<unknown, unknown>) => {
    held = holdFor(turn.batch[i], unit, {
      goOn: (outcome) => {
        held = undefined
        if (endUnit(turn, i, outcome)) proceed(turn, i + 1)
      },
      abandon: () => {
        held = undefined
        abandon(turn, closedError())
      }
    })
  }

  const run = <A, E>(unit: () => Exit.Exit<A, E> | Continuing<A, E>): Effect.Effect<A, E | SqlError.SqlError> =>
    Effect.async<A, E | SqlError.SqlError>((resume) => {
      if (closed) return resume(Effect.fail(closedError()))
      const pending: Pending = {
        unit: unit as Pending["unit"],
        deadline: Date.now() + timeoutMs,
        resume: resume as Pending["resume"],
        cancelled: false
      }
      queue.push(pending)
      schedule()
      return Effect.sync(() => {
        pending.cancelled = true
        if (held?.pending === pending) held.stop(Exit.interrupt(FiberId.none))
      })
    })

  const write = <A>(unit: () => A): Effect.Effect<A, SqlError.SqlError> => run(() => Exit.succeed(unit()))

  /**
   * Fails the units still queued, stops a unit held (its transaction rolled back), waits for the syncs in flight
   * (their units answered), then closes the WAL's descriptor and the connection.
   */
  const close = Effect.async<void>((resume) => {
    if (!closed) {
      closed = true
      if (retryTimer !== undefined) clearTimeout(retryTimer)
      failAll({ batch: queue.splice(0), outcomes: [], locked: [] }, closedError())
      held?.abandon()
    }
    walSync.close(() => {
      database.close()
      resume(Effect.void)
    })
  })

  return { database, write, run, tryLock, close }
}
