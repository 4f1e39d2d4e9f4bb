/**
 * On PostgreSQL, the shared rate-limit counters of windows that have ended are removed in the background, as expired
 * idempotency records are: every minute, in small batches with a pause between them, so that pruning never holds a
 * request up for long. Each replica prunes; a row another replica is removing or updating is skipped. On SQLite the
 * counters live in the process's memory, and there is nothing to do.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer } from "effect"
import { everyInterval, inBatches } from "../Database/Pruning.js"
import { NOW_MS } from "./PostgresStore.js"

/** How often ended windows are looked for. */
export const PRUNE_INTERVAL = Duration.minutes(1)

/**
 * Removes every counter whose window has ended, by the database's clock, a batch at a time; answers how many went. Such
 * a counter starts again from zero at its key's next request whether its row is there or not, so removing it changes
 * no answer; a counter being updated at that moment is skipped (its row is locked).
 */
export const pruneRateLimits = (sql: SqlClient.SqlClient) =>
  inBatches(
    (batch) =>
      sql.unsafe<{ readonly key: string }>(
        `DELETE FROM rate_limits WHERE key IN (
           SELECT key FROM rate_limits WHERE expires_at <= ${NOW_MS} LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING key`,
        [batch]
      ).pipe(Effect.map((rows) => ({ released: rows.length, more: rows.length === batch }))),
    "ended rate-limit windows"
  ).pipe(Effect.withSpan("RateLimits.prune"))

/** The background pruning, for as long as the layer's scope is open; nothing on SQLite. */
export const RateLimitPruningLive = Layer.scopedDiscard(
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.onDialectOrElse({
      pg: () => everyInterval(pruneRateLimits(sql), PRUNE_INTERVAL, "ended rate-limit windows"),
      orElse: () => Effect.void
    }))
)
