/**
 * Readiness means it: `/readyz` is 503 with an Error body while draining and while the database cannot answer, and
 * `/healthz` stays a pure liveness answer through both.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { makeTestServer, type Server, testServerOn } from "./support/http.js"
import { Outage, OutageSqlLive } from "./support/outage.js"

const get = (server: Server, path: string, key?: string) =>
  Effect.promise(async () => {
    const response = await server.fetch(path, key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } })
    return { status: response.status, body: await response.json(), retryAfter: response.headers.get("retry-after") }
  })

describe("readiness", () => {
  it.scoped("turns 503 unavailable as soon as the drain starts; liveness stays 200", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      expect((yield* get(server, "/readyz")).status).toBe(200)
      yield* server.lifecycle.startDrain
      const ready = yield* get(server, "/readyz")
      expect(ready).toEqual({
        status: 503,
        body: { code: "unavailable", message: expect.any(String), status: 503 },
        retryAfter: "1"
      })
      expect(yield* get(server, "/healthz")).toEqual({ status: 200, body: { status: "ok" }, retryAfter: null })
    }))

  it.scoped("is 503 while the database cannot answer, and 200 again once it can; the API answers 503 meanwhile", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(OutageSqlLive)
      const server = yield* testServerOn(Layer.succeedContext(context))
      const outage = Context.get(context, Outage)
      expect((yield* get(server, "/readyz")).status).toBe(200)

      yield* outage.set(true)
      const unavailable = { status: 503, body: { code: "unavailable", message: expect.any(String), status: 503 } }
      expect(yield* get(server, "/readyz")).toEqual({ ...unavailable, retryAfter: "1" })
      expect(yield* get(server, "/v1/pets", server.key)).toMatchObject(unavailable)
      expect((yield* get(server, "/healthz")).status).toBe(200)

      yield* outage.set(false)
      expect((yield* get(server, "/readyz")).status).toBe(200)
      expect(yield* get(server, "/v1/pets", server.key)).toMatchObject({ status: 200, body: [] })
    }))
})
