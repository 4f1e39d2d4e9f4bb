/**
 * The quota of each API key (`RATE_LIMIT`), checked once per authenticated request by the `Authorization` middleware
 * right after the key: a fixed window per key, counted in the process's memory on SQLite (one process serves a SQLite
 * file) and in the database on PostgreSQL (every replica counts against the same quota), by the algorithm of
 * `@effect/experimental`'s `RateLimiter` stores (`MemoryWindow.ts`, `PostgresStore.ts`). Every answer of a
 * rate-limited request states the quota (`RateLimit-Policy`, `RateLimit`); past it the answer is 429 `rate_limited`
 * with `Retry-After`, and nothing is done.
 */
import type { RateLimiter } from "@effect/experimental"
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Option } from "effect"
import { type RateLimited, rateLimited, type Unavailable } from "../Domain/Errors.js"
import { addResponseHeaders } from "../ResponseHeaders.js"
import { SqliteDatabase } from "../Sqlite.js"
import { answerUnavailable } from "../Unavailable.js"
import { makeMemoryWindow, type WindowCount } from "./MemoryWindow.js"
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

/** A key's count after one more request. */
type Count = (key: string) => Effect.Effect<WindowCount, RateLimiter.RateLimiterError>

/** The count of the backend in use: PostgreSQL's shared counters for PostgreSQL, else the process's memory. */
const counterFor = (policy: Policy) =>
  Effect.gen(function*() {
    // Each admitted request moves its key's counter this much later (as `RateLimiter` computes it for its stores).
    const refillRate = Duration.unsafeDivide(policy.window, policy.limit)
    const inMemory = (): Count => {
      const count = makeMemoryWindow(policy.limit, refillRate)
      return (key) => Effect.clockWith((clock) => Effect.sync(() => count(key, clock.unsafeCurrentTimeMillis())))
    }
    if (Option.isSome(yield* Effect.serviceOption(SqliteDatabase))) return inMemory()
    const sql = yield* SqlClient.SqlClient
    return sql.onDialectOrElse({
      pg: (): Count => {
        const store = makePostgresStore(sql)
        return (key) => store.fixedWindow({ key, tokens: 1, refillRate, limit: policy.limit })
      },
      orElse: inMemory
    })
  })

const limitedBy = (count: Count, policy: Policy): RateLimitsService["consume"] => {
  const policyHeader = policyField(policy)
  /** The quota stated in the answer's headers, given the key's count; past it, the 429. */
  const stated = ([requests, ttlMillis]: WindowCount): Effect.Effect<void, RateLimited> => {
    const remaining = policy.limit - requests
    if (remaining >= 0) {
      return addResponseHeaders({
        "ratelimit-policy": policyHeader,
        ratelimit: limitField(remaining, secondsOf(ttlMillis))
      })
    }
    // At least a second: `Retry-After: 0` would invite the same request at once.
    const wait = Math.max(1, secondsOf(ttlMillis))
    return addResponseHeaders({
      "ratelimit-policy": policyHeader,
      ratelimit: limitField(0, wait),
      "retry-after": String(wait)
    }).pipe(Effect.zipRight(Effect.fail(rateLimited(wait))))
  }
  return (keyId) =>
    count(keyId).pipe(
      Effect.catchAll((error) => answerUnavailable("rate-limit store failure", error)),
      Effect.flatMap(stated)
    )
}

export class RateLimits extends Effect.Service<RateLimits>()("RateLimit/RateLimits", {
  effect: Effect.gen(function*() {
    const policy = yield* RateLimitConfig
    if (Option.isNone(policy)) {
      return { policy, consume: () => Effect.void } satisfies RateLimitsService as RateLimitsService
    }
    const count = yield* counterFor(policy.value)
    return { policy, consume: limitedBy(count, policy.value) } satisfies RateLimitsService as RateLimitsService
  })
}) {}
