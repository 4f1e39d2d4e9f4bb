/**
 * The PostgreSQL `RateLimiterStore` through `@effect/experimental`'s `RateLimiter`, as the in-memory store behaves:
 * a fixed window, and one quota for several clients of the database at once; counters of ended windows are pruned.
 */
import { RateLimiter } from "@effect/experimental"
import { SqlClient } from "@effect/sql"
import { expect, it } from "@effect/vitest"
import { Duration, Effect, Either, Layer, TestClock } from "effect"
import * as Sql from "../src/Database/Sql.js"
import { makePostgresStore } from "../src/RateLimit/PostgresStore.js"
import { PRUNE_INTERVAL, pruneRateLimits, RateLimitPruningLive } from "../src/RateLimit/Pruning.js"
import { describePostgres } from "./support/backends.js"

const realSleep = (ms: number) => Effect.promise(() => new Promise((done) => setTimeout(done, ms)))

describePostgres((backend) => {
  const sqlOn = Effect.gen(function*() {
    const url = yield* backend.freshDatabase
    return yield* Effect.provide(SqlClient.SqlClient, yield* Layer.build(Sql.layer(url)))
  })

  const limiterWith = (sql: SqlClient.SqlClient) =>
    RateLimiter.make.pipe(Effect.provideService(RateLimiter.RateLimiterStore, makePostgresStore(sql)))

  const limiterOn = Effect.flatMap(sqlOn, limiterWith)

  const keysOf = (sql: SqlClient.SqlClient) =>
    Effect.map(sql<{ key: string }>`SELECT key FROM rate_limits ORDER BY key`, (rows) => rows.map((row) => row.key))

  it.scoped("fixed window: the limit, then refusals with the time left, then a new window", () =>
    Effect.gen(function*() {
      const limiter = yield* limiterOn
      const take = limiter.consume({ key: "k", limit: 3, window: "1 second", algorithm: "fixed-window" })
      const remaining = []
      for (let i = 0; i < 3; i++) remaining.push((yield* take).remaining)
      expect(remaining).toEqual([2, 1, 0])
      const refused = yield* Effect.either(take)
      expect(Either.isLeft(refused)).toBe(true)
      if (Either.isLeft(refused) && refused.left.reason === "Exceeded") {
        expect(Duration.toMillis(refused.left.retryAfter)).toBeGreaterThan(0)
        expect(Duration.toMillis(refused.left.retryAfter)).toBeLessThanOrEqual(1000)
      }
      // Another key has a quota of its own.
      expect((yield* limiter.consume({ key: "other", limit: 3, window: "1 second" })).remaining).toBe(2)
      yield* realSleep(1050)
      expect((yield* take).remaining).toBe(2)
    }))

  it.scoped("fixed window: concurrent takes admit exactly the limit", () =>
    Effect.gen(function*() {
      const limiter = yield* limiterOn
      const results = yield* Effect.all(
        Array.from(
          { length: 30 },
          () => Effect.either(limiter.consume({ key: "busy", limit: 10, window: "1 minute" }))
        ),
        { concurrency: "unbounded" }
      )
      expect(results.filter(Either.isRight)).toHaveLength(10)
    }))

  it.scoped("token bucket: refused with a store error, as RATE_LIMIT counts fixed windows only", () =>
    Effect.gen(function*() {
      const limiter = yield* limiterOn
      const taken = yield* Effect.either(
        limiter.consume({ key: "b", limit: 3, window: "3 seconds", algorithm: "token-bucket" })
      )
      expect(Either.isLeft(taken) && taken.left.reason).toBe("StoreError")
    }))

  it.scoped("pruning removes the counters of ended windows, and keeps running windows", () =>
    Effect.gen(function*() {
      const sql = yield* sqlOn
      const limiter = yield* limiterWith(sql)
      yield* limiter.consume({ key: "ended", limit: 1, window: "200 millis" })
      yield* limiter.consume({ key: "running", limit: 5, window: "1 hour" })
      yield* realSleep(300)
      expect(yield* pruneRateLimits(sql)).toBe(1)
      expect(yield* keysOf(sql)).toEqual(["fixed:running"])
      // The pruned key starts a new window, as it would have with its row still there.
      expect((yield* limiter.consume({ key: "ended", limit: 1, window: "200 millis" })).remaining).toBe(0)
    }))

  it.scoped("pruning runs in the background every PRUNE_INTERVAL while its layer is up", () =>
    Effect.gen(function*() {
      const sql = yield* sqlOn
      const limiter = yield* limiterWith(sql)
      yield* limiter.consume({ key: "ended", limit: 1, window: "100 millis" })
      yield* realSleep(200)
      yield* Layer.build(RateLimitPruningLive.pipe(Layer.provide(Layer.succeed(SqlClient.SqlClient, sql))))
      expect(yield* keysOf(sql)).toEqual(["fixed:ended"])
      yield* TestClock.adjust(PRUNE_INTERVAL)
      // The pruning fiber runs its statement against the real database: waited for, at most 10 seconds.
      for (let attempt = 0; attempt < 100 && (yield* keysOf(sql)).length > 0; attempt++) yield* realSleep(100)
      expect(yield* keysOf(sql)).toEqual([])
    }))
})
