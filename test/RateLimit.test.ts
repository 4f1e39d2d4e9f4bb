/**
 * Per-key rate limits (draft-ietf-httpapi-ratelimit-headers-10), on each backend, through the engine. The fields
 * are read with a Structured Fields parser, as a client would.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either, Option, TestClock } from "effect"
import { parseList, Token } from "structured-headers"
import { parsePolicy, RateLimitConfig } from "../src/RateLimit/RateLimits.js"
import { describeBackends } from "./support/backends.js"
import { type App, appWith, json } from "./support/retries.js"

/** The one item of a RateLimit or RateLimit-Policy field: its name and its parameters. */
const fieldOf = (response: Response, name: string) => {
  const value = response.headers.get(name)
  expect(value, name).not.toBeNull()
  const list = parseList(value!)
  expect(list).toHaveLength(1)
  const [item, params] = list[0]
  expect(typeof item).toBe("string")
  expect(item).not.toBeInstanceOf(Token)
  return { name: item as string, params: Object.fromEntries(params) as Record<string, unknown> }
}

const list = (app: App, key = app.key) => app.fetch("/v1/pets", { headers: { authorization: `Bearer ${key}` } })

/** Waits in real time (the PostgreSQL store keeps the database server's time). */
const realSleep = (ms: number) => Effect.promise(() => new Promise((done) => setTimeout(done, ms)))

describe("RATE_LIMIT", () => {
  it("takes off, N/second, N/minute and N/hour", () => {
    expect(parsePolicy("off")).toEqual(Option.none())
    expect(Option.getOrThrow(parsePolicy("100/minute")!)).toMatchObject({ limit: 100, windowSeconds: 60 })
    expect(Option.getOrThrow(parsePolicy("5/second")!)).toMatchObject({ limit: 5, windowSeconds: 1 })
    expect(Option.getOrThrow(parsePolicy("1000/hour")!)).toMatchObject({ limit: 1000, windowSeconds: 3600 })
  })
  it.effect("refuses anything else, naming the variable and the accepted forms", () =>
    Effect.gen(function*() {
      for (const bad of ["0/minute", "10", "10/day", "ten/minute", "-1/second", "10 / minute", "1.5/second"]) {
        const result = yield* Effect.either(
          Effect.withConfigProvider(RateLimitConfig, ConfigProvider.fromMap(new Map([["RATE_LIMIT", bad]])))
        )
        expect(Either.isLeft(result), bad).toBe(true)
        if (Either.isLeft(result)) {
          expect(String(result.left)).toContain("RATE_LIMIT")
          expect(String(result.left)).toContain("N/minute")
        }
      }
    }))
})

describeBackends((backend) => {
  describe("rate limits", () => {
    it.scoped("off by default: no RateLimit fields", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        const response = yield* list(app)
        expect(response.status).toBe(200)
        expect(response.headers.get("ratelimit")).toBeNull()
        expect(response.headers.get("ratelimit-policy")).toBeNull()
      }))

    it.scoped("every authenticated answer states the policy; r counts down; past the quota 429 with Retry-After", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend, { RATE_LIMIT: "5/minute" })
        for (let i = 1; i <= 5; i++) {
          const response = i === 3
            ? yield* app.fetch("/v1/pets/999", { headers: { authorization: `Bearer ${app.key}` } })
            : yield* list(app)
          expect(response.status).toBe(i === 3 ? 404 : 200)
          expect(fieldOf(response, "ratelimit-policy")).toEqual({ name: "default", params: { q: 5, w: 60 } })
          const limit = fieldOf(response, "ratelimit")
          expect(limit.name).toBe("default")
          expect(limit.params.r).toBe(5 - i)
          expect(limit.params.t).toBeGreaterThanOrEqual(1)
          expect(limit.params.t).toBeLessThanOrEqual(60)
        }
        const refused = yield* app.fetch("/v1/pets", {
          method: "POST",
          headers: { authorization: `Bearer ${app.key}`, "content-type": "application/json" },
          body: JSON.stringify({ name: "Rex", categoryId: 1 })
        })
        expect(refused.status).toBe(429)
        expect(yield* json(refused)).toMatchObject({ code: "rate_limited", status: 429 })
        const retryAfter = Number(refused.headers.get("retry-after"))
        expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60).toBe(true)
        expect(fieldOf(refused, "ratelimit").params).toEqual({ r: 0, t: retryAfter })
        // Nothing was done.
        expect(Number((yield* app.sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM pets`.pipe(Effect.orDie))[0].n))
          .toBe(0)
      }))

    it.scoped("the library's own server on the same registration counts and states the quota alike", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend, { RATE_LIMIT: "2/minute" }, { reference: true })
        expect(fieldOf(yield* list(app), "ratelimit").params.r).toBe(1)
        expect(fieldOf(yield* list(app), "ratelimit").params.r).toBe(0)
        const refused = yield* list(app)
        expect(refused.status).toBe(429)
        expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
        expect(fieldOf(refused, "ratelimit-policy")).toEqual({ name: "default", params: { q: 2, w: 60 } })
      }))

    it.scoped("the quota is per API key; an unauthenticated answer carries no RateLimit fields", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend, { RATE_LIMIT: "2/hour" })
        const other = yield* app.newKey("other")
        for (let i = 0; i < 2; i++) expect((yield* list(app)).status).toBe(200)
        expect((yield* list(app)).status).toBe(429)
        const theirs = yield* list(app, other)
        expect(theirs.status).toBe(200)
        expect(fieldOf(theirs, "ratelimit").params.r).toBe(1)
        const anonymous = yield* app.fetch("/v1/pets")
        expect(anonymous.status).toBe(401)
        expect(anonymous.headers.get("ratelimit")).toBeNull()
      }))

    it.scoped("the window resets: after t seconds the whole quota is back", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend, { RATE_LIMIT: "3/second" })
        let last: Response | undefined
        for (let i = 0; i < 3; i++) last = yield* list(app)
        expect(fieldOf(last!, "ratelimit").params.r).toBe(0)
        const refused = yield* list(app)
        expect(refused.status).toBe(429)
        const wait = Number(refused.headers.get("retry-after"))
        expect(wait).toBe(1)
        // In memory the window follows the Effect clock; on PostgreSQL, the database server's.
        yield* TestClock.adjust("1 second")
        if (backend.name === "PostgreSQL") yield* realSleep(1050)
        const again = yield* list(app)
        expect(again.status).toBe(200)
        expect(fieldOf(again, "ratelimit").params.r).toBe(2)
      }))
  })
})
