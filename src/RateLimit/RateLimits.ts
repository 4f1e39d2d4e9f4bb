/**
 * The quota of each API key (`RATE_LIMIT`), checked once per authenticated request by the `Authorization` middleware
 * right after the key: a fixed window per key, counted in the process's memory on SQLite (one process serves a SQLite
 * file) and in the database on PostgreSQL (every replica counts against the same quota), by the algorithm of
 * `@effect/experimental`'s `RateLimiter` stores (`MemoryWindow.ts`, `PostgresStore.ts`). Every answer of a
 * rate-limited request states the quota (`RateLimit-Policy`, `RateLimit`); past it the answer is 429 `rate_limited`
 * with `Retry-After`, and nothing is done.
 *
 * The in-memory count is done at once (an `Exit`, `Immediate.ts`): the quota costs no step of a fiber.
 * That is why `RateLimiter.consume`, whose every call is a chain of Effect steps, is not used.
 */
import type { RateLimiter } from "@effect/experimental"
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Exit, Option } from "effect"
import { type RateLimited, rateLimited, type Unavailable } from "../Domain/Errors.js"
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
   * the shared counters cannot be reached). Done at once when the count is in memory.
   */
  readonly consume: (
    keyId: string,
    answerHeaders: Record<string, string>
  ) => Effect.Effect<void, RateLimited | Unavailable>
}

/** A key's count after one more request: known at once in memory, an effect when the database keeps it. */
type Count = (key: string) => WindowCount | Effect.Effect<WindowCount, RateLimiter.RateLimiterError>

/** The count of the backend in use: PostgreSQL's shared counters for PostgreSQL, else the process's memory. */
const counterFor = (policy: Policy) =>
  Effect.gen(function*() {
    const clock = yield* Effect.clock
    // Each admitted request moves its key's counter this much later (as `RateLimiter` computes it for its stores).
    const refillRate = Duration.unsafeDivide(policy.window, policy.limit)
    const inMemory = (): Count => {
      const count = makeMemoryWindow(policy.limit, refillRate)
      return (key) => count(key, clock.unsafeCurrentTimeMillis())
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
  const stated = (
    answerHeaders: Record<string, string>,
    [requests, ttlMillis]: WindowCount
  ): Exit.Exit<void, RateLimited> => {
    answerHeaders["ratelimit-policy"] = policyHeader
    const remaining = policy.limit - requests
    if (remaining >= 0) {
      answerHeaders.ratelimit = limitField(remaining, secondsOf(ttlMillis))
      return Exit.void
    }
    // At least a second: `Retry-After: 0` would invite the same request at once.
    const wait = Math.max(1, secondsOf(ttlMillis))
    answerHeaders.ratelimit = limitField(0, wait)
    answerHeaders["retry-after"] = String(wait)
    return Exit.fail(rateLimited(wait))
  }
  return (keyId, answerHeaders) => {
    const counted = count(keyId)
    if (!Effect.isEffect(counted)) return stated(answerHeaders, counted)
    return Effect.matchEffect(counted, {
      onSuccess: (count) => stated(answerHeaders, count),
      onFailure: (error) => answerUnavailable("rate-limit store failure", error)
    })
  }
}

export class RateLimits extends Effect.Service<RateLimits>()("RateLimit/RateLimits", {
  effect: Effect.gen(function*() {
    const policy = yield* RateLimitConfig
    if (Option.isNone(policy)) {
      return { policy, consume: () => Exit.void } satisfies RateLimitsService as RateLimitsService
    }
    const count = yield* counterFor(policy.value)
    return { policy, consume: limitedBy(count, policy.value) } satisfies RateLimitsService as RateLimitsService
  })
}) {}
