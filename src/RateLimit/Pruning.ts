/**
 * On PostgreSQL, the shared rate-limit counters of windows that have ended are removed in the background, as expired
 * idempotency records are: every minute, in small batches with a pause between them, so that pruning never holds a
 * request up for long. Each replica prunes; a row another replica is removing or updating is skipped. On SQLite the
 * counters live in the process's memory, and there is nothing to do.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer, Schedule } from "effect"
import { pruneExpiredWindows } from "./PostgresStore.js"

/** How often ended windows are looked for, how many rows one statement removes, and the pause between statements. */
export const PRUNE_INTERVAL = Duration.minutes(1)
const PRUNE_BATCH = 500
const PRUNE_PAUSE = Duration.millis(10)

/** Removes every counter whose window has ended, a batch at a time; answers how many went. */
export const pruneRateLimits = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    let deleted = 0
    for (;;) {
      const step = yield* pruneExpiredWindows(sql, PRUNE_BATCH)
      deleted += step
      if (step < PRUNE_BATCH) break
      yield* Effect.sleep(PRUNE_PAUSE)
    }
    if (deleted > 0) yield* Effect.logDebug("ended rate-limit windows pruned", { deleted })
    return deleted
  }).pipe(Effect.withSpan("RateLimits.prune"))

/** The background pruning, for as long as the layer's scope is open; nothing on SQLite. */
export const RateLimitPruningLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql.onDialectOrElse({
      pg: () =>
        pruneRateLimits(sql).pipe(
          Effect.catchAllCause((cause) => Effect.logWarning("pruning ended rate-limit windows failed", cause)),
          Effect.repeat(Schedule.spaced(PRUNE_INTERVAL)),
          Effect.delay(PRUNE_INTERVAL),
          Effect.forkScoped,
          Effect.asVoid
        ),
      orElse: () => Effect.void
    })
  })
)
