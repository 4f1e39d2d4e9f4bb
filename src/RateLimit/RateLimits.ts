/**
 * The quota of each API key (`RATE_LIMIT`), checked once per authenticated request by the `Authorization` middleware
 * right after the key: `@effect/experimental`'s `RateLimiter`, a fixed window per key, counted in the process's memory
 * on SQLite (one process serves a SQLite file) and in the database on PostgreSQL (every replica counts against the same
 * quota: `PostgresStore.ts`). Every answer of a rate-limited request states the quota (`RateLimit-Policy`,
 * `RateLimit`); past it the answer is 429 `rate_limited` with `Retry-After`, and nothing is done.
 */
import { RateLimiter } from "@effect/experimental"
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer, Option } from "effect"
import { SqliteDatabase } from "../Database/Sqlite.js"
import { type RateLimited, rateLimited, type Unavailable } from "../Domain/Errors.js"
import { addResponseHeaders } from "../ResponseHeaders.js"
import { answerUnavailable } from "../Unavailable.js"
import { limitField, type Policy, policyField, RateLimitConfig, secondsOf } from "./Policy.js"
import { makePostgresStore } from "./PostgresStore.js"

export interface RateLimitsService {
  /** The policy in force; `None` when limits are off. */
  readonly policy: Option.Option<Policy>
  /**
   * Counts one request of this API key: states the quota in the answer's headers, and fails with 429 past it (503 when
   * the shared counters cannot be reached).
   */
  readonly consume: (keyId: string) => Effect.Effect<void, RateLimited | Unavailable>
}

/** The counters of the backend in use: PostgreSQL's shared ones for PostgreSQL, else the process's memory. */
const storeFor = Effect.gen(function*() {
  if (Option.isSome(yield* Effect.serviceOption(SqliteDatabase))) return RateLimiter.layerStoreMemory
  const sql = yield* SqlClient.SqlClient
  return sql.onDialectOrElse({
    pg: () => Layer.succeed(RateLimiter.RateLimiterStore, makePostgresStore(sql)),
    orElse: () => RateLimiter.layerStoreMemory
  })
})

const limitedBy = (limiter: RateLimiter.RateLimiter, policy: Policy): RateLimitsService["consume"] => {
  const options = { limit: policy.limit, window: policy.window, algorithm: "fixed-window", onExceeded: "fail" } as const
  const policyHeader = policyField(policy)
  const secondsUntil = (duration: Duration.Duration) => secondsOf(Duration.toMillis(duration))
  return (keyId) =>
    Effect.matchEffect(limiter.consume({ ...options, key: keyId }), {
      onSuccess: (result) =>
        addResponseHeaders({
          "ratelimit-policy": policyHeader,
          ratelimit: limitField(result.remaining, secondsUntil(result.resetAfter))
        }),
      onFailure: (error): Effect.Effect<void, RateLimited | Unavailable> => {
        if (error.reason !== "Exceeded") return answerUnavailable("rate-limit store failure", error)
        // At least a second: `Retry-After: 0` would invite the same request at once.
        const wait = Math.max(1, secondsUntil(error.retryAfter))
        return Effect.zipRight(
          addResponseHeaders({
            "ratelimit-policy": policyHeader,
            ratelimit: limitField(0, wait),
            "retry-after": String(wait)
          }),
          Effect.fail(rateLimited(wait))
        )
      }
    })
}

export class RateLimits extends Effect.Service<RateLimits>()("RateLimit/RateLimits", {
  effect: Effect.gen(function*() {
    const policy = yield* RateLimitConfig
    if (Option.isNone(policy)) {
      return { policy, consume: () => Effect.void } satisfies RateLimitsService as RateLimitsService
    }
    const limiter = yield* Effect.provide(RateLimiter.make, yield* storeFor)
    return { policy, consume: limitedBy(limiter, policy.value) } satisfies RateLimitsService as RateLimitsService
  })
}) {}
