/**
 * What the SQLite writer (`SqliteWriter.ts`) runs and answers: its interface, the units handed to it, the turns they
 * run in, and the `SqlError`s they fail with.
 */
import { SqlError } from "@effect/sql"
import type { Database } from "bun:sqlite"
import { Effect, Exit } from "effect"

/**
 * A unit that goes on after its synchronous part (a transaction's body that waits): the writer holds its transaction
 * open, the unit's savepoint with it, until the unit ends or its deadline passes.
 */
export interface Continuing<A, E> {
  /** Calls `done` once, with the unit's outcome, when it ends. */
  readonly onEnd: (done: (outcome: Exit.Exit<A, E>) => void) => void
  /** Stops the unit (its deadline passed, its caller is gone, the writer closes): none of its statements runs after. */
  readonly stop: () => void
}

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
   * Runs `unit` as `write` does, but the unit gives its own outcome: an `Exit`, whose failure (of whatever kind) rolls
   * its statements back and is its answer; or `Continuing`, and the writer holds the transaction until it ends. Past
   * the unit's deadline it is stopped, rolled back, and fails with a `SqlError`; so it is if its caller is interrupted.
   */
  readonly run: <A, E>(unit: () => Exit.Exit<A, E> | Continuing<A, E>) => Effect.Effect<A, E | SqlError.SqlError>
  /**
   * Inside a unit: takes the lock `name` until the unit's transaction is settled (its commit durable, or failed);
   * false when a unit of an unsettled transaction holds it. So what a unit writes under a lock is durable before
   * another unit reads it under that lock, as a transaction-scoped lock makes it on PostgreSQL.
   */
  readonly tryLock: (name: string) => boolean
}

export type Outcome = Exit.Exit<unknown, unknown>

/** A unit handed to the writer: what it runs, by when, and how its caller is answered. */
export interface Pending {
  readonly unit: () => Outcome | Continuing<unknown, unknown>
  readonly deadline: number
  readonly resume: (effect: Effect.Effect<unknown, unknown>) => void
  cancelled: boolean
}

/** The transaction of one group commit: its units, their outcomes so far, the locks they took. */
export interface Turn {
  readonly batch: Array<Pending>
  readonly outcomes: Array<Outcome | undefined>
  readonly locked: Array<string>
}

export const failedWith = (message: string) => (cause: unknown) => new SqlError.SqlError({ cause, message })
export const statementFailed = failedWith("Failed to execute statement")
export const closedError = () => failedWith("The database is closed")(new Error("closed"))
export const stayedBusy = failedWith("The database stayed busy past DB_QUERY_TIMEOUT")
export const heldTooLong = () =>
  failedWith("The transaction did not end within DB_QUERY_TIMEOUT")(new Error("transaction timed out"))
export const isContinuing = (
  outcome: Outcome | Continuing<unknown, unknown>
): outcome is Continuing<unknown, unknown> => !Exit.isExit(outcome)

/** Answers the units of a transaction that failed with `error`; a unit that failed on its own keeps its failure. */
export const failAll = (turn: Turn, error: SqlError.SqlError) => {
  for (let i = 0; i < turn.batch.length; i++) {
    const own = turn.outcomes[i]
    if (!turn.batch[i].cancelled) {
      turn.batch[i].resume(own !== undefined && Exit.isFailure(own) ? own : Effect.fail(error))
    }
  }
}

/** Fails the units of `queue` whose deadline has passed: the units kept, and the time until the nearest deadline. */
export const expire = (queue: ReadonlyArray<Pending>, now: number) => {
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
  return { kept, nearest }
}
