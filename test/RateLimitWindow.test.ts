/**
 * The in-memory quota counter (`RateLimit/MemoryWindow.ts`) against the store it reproduces, `@effect/experimental`'s
 * in-memory `RateLimiterStore`: the same takes at the same times give the same count and time left.
 */
import { RateLimiter } from "@effect/experimental"
import { expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, TestClock } from "effect"
import { makeMemoryWindow } from "../src/RateLimit/MemoryWindow.js"

it.effect("counts as @effect/experimental's in-memory fixed window does, take after take", () =>
  Effect.gen(function*() {
    const limit = 3
    const windowMillis = 1000
    const store = yield* Effect.provide(RateLimiter.RateLimiterStore, RateLimiter.layerStoreMemory)
    const refillRate = Duration.unsafeDivide(Duration.millis(windowMillis), limit)
    const window = makeMemoryWindow(limit, refillRate)
    // Bursts past the limit, waits shorter and longer than the window, two keys; the same pseudo-random walk each run.
    let seed = 7
    const next = () => (seed = (seed * 48271) % 2147483647) / 2147483647
    for (let i = 0; i < 150; i++) {
      const key = next() < 0.3 ? "b" : "a"
      const expected = yield* store.fixedWindow({ key, tokens: 1, refillRate, limit })
      expect(window(key, yield* Clock.currentTimeMillis), `take ${i}`).toEqual(expected)
      const pause = next()
      yield* TestClock.adjust(pause < 0.5 ? 0 : pause < 0.8 ? Math.floor(pause * 400) : Math.floor(pause * 1500))
    }
  }))
