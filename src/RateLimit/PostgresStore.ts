/**
 * A `RateLimiterStore` (`@effect/experimental`) in PostgreSQL, so that every replica counts against the same quota.
 *
 * One row per key in `rate_limits`, updated by one atomic `INSERT … ON CONFLICT DO UPDATE` per request: the count is
 * exact across replicas (no lease, no approximation), at the cost of one statement per rate-limited request. Times are
 * the database server's clock, so replicas whose clocks disagree still share one window.
 *
 * `fixedWindow` keeps the in-memory store's semantics: each admitted request moves the counter's expiry
 * `window / limit` later, a refused one does not; when the expiry has passed, the counter starts again from zero. (A
 * refused request is still counted, which only keeps the counter over the limit until the same expiry.)
 *
 * Counters whose window has ended are removed in the background (`Pruning.ts`).
 */
import { RateLimiter } from "@effect/experimental"
import type { SqlClient } from "@effect/sql"
import { Duration, Effect } from "effect"

/** The database server's clock, in milliseconds since the epoch. */
export const NOW_MS = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"

const storeError = (cause: unknown) =>
  new RateLimiter.RateLimitStoreError({ message: "The rate-limit counters cannot be read", cause })

export const makePostgresStore = (sql: SqlClient.SqlClient): RateLimiter.RateLimiterStore["Type"] => ({
  fixedWindow: ({ key, limit, refillRate, tokens }) => {
    const step = Math.round(Duration.toMillis(refillRate) * tokens)
    const cap = limit ?? Number.MAX_SAFE_INTEGER
    return sql.unsafe<{ readonly count: string | number; readonly ttl: string | number }>(
      `WITH clock AS (SELECT ${NOW_MS} AS now)
       INSERT INTO rate_limits AS counter (key, count, expires_at)
       SELECT $1, $2, clock.now + $3 FROM clock
       ON CONFLICT (key) DO UPDATE SET
         count = CASE WHEN counter.expires_at <= excluded.expires_at - $3 THEN $2::bigint
                      ELSE counter.count + $2 END,
         expires_at = CASE WHEN counter.expires_at <= excluded.expires_at - $3 THEN excluded.expires_at
                           WHEN counter.count + $2 > $4 THEN counter.expires_at
                           ELSE counter.expires_at + $3 END
       RETURNING count, expires_at - (SELECT now FROM clock) AS ttl`,
      [`fixed:${key}`, tokens, step, cap]
    ).pipe(
      Effect.mapError(storeError),
      Effect.map((rows) => [Number(rows[0].count), Math.max(0, Number(rows[0].ttl))] as const)
    )
  },
  // `RATE_LIMIT` counts fixed windows; no part of the service asks for a token bucket.
  tokenBucket: () =>
    Effect.fail(new RateLimiter.RateLimitStoreError({ message: "The PostgreSQL store counts fixed windows only" }))
})
