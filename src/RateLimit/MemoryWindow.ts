/**
 * The fixed window of `@effect/experimental`'s in-memory `RateLimiterStore`, kept by hand: `RateLimiter.consume`'s chain of
 * Effect steps cost every rate-limited request more than 10 % of its CPU time. The same semantics as that
 * store (test/RateLimitWindow.test.ts runs both side by side) and as the PostgreSQL store: each admitted request moves
 * its key's expiry `window / limit` later, a refused one does not; once the expiry has passed, the count starts again
 * from zero.
 */
import { Duration } from "effect"

/** A key's count after this request (over `limit`: refused) and the milliseconds until its counter expires. */
export type WindowCount = readonly [count: number, ttlMillis: number]

/** The counter of a quota of `limit` requests, given the window over the limit (`refillRate`, as the stores take it). */
export const makeMemoryWindow = (limit: number, refillRate: Duration.Duration) => {
  const step = Duration.toMillis(refillRate)
  // One counter per API key that made a request (keys are checked before they count): bounded by the keys issued.
  const counters = new Map<string, { count: number; expiresAt: number }>()
  return (key: string, now: number): WindowCount => {
    let counter = counters.get(key)
    if (counter === undefined || counter.expiresAt <= now) {
      counter = { count: 0, expiresAt: now }
      counters.set(key, counter)
    }
    if (counter.count + 1 > limit) return [counter.count + 1, counter.expiresAt - now]
    counter.count += 1
    counter.expiresAt += step
    return [counter.count, counter.expiresAt - now]
  }
}
