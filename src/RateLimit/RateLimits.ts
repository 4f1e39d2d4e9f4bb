/**
 * The quota of each API key (`RATE_LIMIT`), checked once per authenticated request by the `Authorization` middleware
 * right after the key: `@effect/experimental`'s `RateLimiter` (fixed window) on a store that is the process's memory on
 * SQLite (one process serves a SQLite file) and the database on PostgreSQL (every replica counts against the same
 * quota). Every answer of a rate-limited request states the quota (`RateLimit-Policy`, `RateLimit`); past it the
 * answer is 429 `rate_limited` with `Retry-After`, and nothing is done.
 */
import { RateLimiter } from "@effect/experimental"
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer, Option } from "effect"
import { type RateLimited, rateLimited, type Unavailable, unavailable } from "../Domain/Errors.js"
import { addResponseHeaders } from "../ResponseHeaders.js"
import { SqliteDatabase } from "../Sqlite.js"
import { UNAVAILABLE_HEADERS } from "../Unavailable.js"
import { limitField, type Policy, policyField, RateLimitConfig, secondsOf } from "./Policy.js"
import { makePostgresStore } from "./PostgresStore.js"

/** The store of the backend in use: PostgreSQL's for PostgreSQL, else the process's memory. */
const StoreLive = Layer.unwrapEffect(
  Effect.gen(function*() {
    const sqlite = yield* Effect.serviceOption(SqliteDatabase)
    const sql = yield* SqlClient.SqlClient
    if (Option.isSome(sqlite)) return RateLimiter.layerStoreMemory
    return sql.onDialectOrElse({
      pg: () => Layer.succeed(RateLimiter.RateLimiterStore, makePostgresStore(sql)),
      orElse: () => RateLimiter.layerStoreMemory
    })
  })
)

export interface RateLimitsService {
  /** The policy in force; `None` when limits are off. */
  readonly policy: Option.Option<Policy>
  /**
   * Counts one request of this API key: states the quota on the answer, and fails with 429 past it (503 when the
   * shared counters cannot be reached).
   */
  readonly consume: (keyId: string) => Effect.Effect<void, RateLimited | Unavailable>
}

const limitedBy = (limiter: RateLimiter.RateLimiter, policy: Policy): RateLimitsService["consume"] => {
  const policyHeader = policyField(policy)
  return (keyId) =>
    limiter.consume({ key: keyId, limit: policy.limit, window: policy.window, algorithm: "fixed-window" }).pipe(
      Effect.matchEffect({
        onSuccess: (result) =>
          addResponseHeaders({
            "ratelimit-policy": policyHeader,
            ratelimit: limitField(result.remaining, result.resetAfter)
          }),
        onFailure: (error): Effect.Effect<never, RateLimited | Unavailable> => {
          if (error.reason === "StoreError") {
            return Effect.logError("rate-limit store failure", error).pipe(
              Effect.zipRight(addResponseHeaders(UNAVAILABLE_HEADERS)),
              Effect.zipRight(Effect.fail(unavailable()))
            )
          }
          // At least a second: `Retry-After: 0` would invite the same request at once.
          const wait = Math.max(1, secondsOf(error.retryAfter))
          return addResponseHeaders({
            "ratelimit-policy": policyHeader,
            ratelimit: limitField(0, Duration.seconds(wait)),
            "retry-after": String(wait)
          }).pipe(Effect.zipRight(Effect.fail(rateLimited(wait))))
        }
      })
    )
}

export class RateLimits extends Effect.Service<RateLimits>()("RateLimit/RateLimits", {
  effect: Effect.gen(function*() {
    const policy = yield* RateLimitConfig
    if (Option.isNone(policy)) {
      return { policy, consume: () => Effect.void } satisfies RateLimitsService as RateLimitsService
    }
    const limiter = yield* RateLimiter.make.pipe(Effect.provide(StoreLive))
    return { policy, consume: limitedBy(limiter, policy.value) } satisfies RateLimitsService as RateLimitsService
  })
}) {}
