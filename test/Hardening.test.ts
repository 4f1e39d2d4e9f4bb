/**
 * Hardening: CORS off unless configured (and then preflights answered without a key), size limits on the URL and
 * the headers answered with an Error body.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Sql from "../src/Database/Sql.js"
import { makeTestServer, testServerOn } from "./support/http.js"

const APP = "https://app.example.test"
const preflight: RequestInit = {
  method: "OPTIONS",
  headers: {
    origin: APP,
    "access-control-request-method": "POST",
    "access-control-request-headers": "authorization, content-type"
  }
}

describe("CORS", () => {
  it.scoped("is off by default: no CORS header, and a preflight is no special request", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      const response = yield* Effect.promise(() => server.fetch("/v1/pets", preflight))
      expect(response.status).toBe(405)
      expect(response.headers.get("access-control-allow-origin")).toBeNull()
      const get = yield* Effect.promise(() =>
        server.fetch("/v1/pets", { headers: { origin: APP, authorization: `Bearer ${server.key}` } })
      )
      expect(get.headers.get("access-control-allow-origin")).toBeNull()
    }))

  it.scoped("with CORS_ORIGINS, a preflight is answered without a key and responses name the origin", () =>
    Effect.gen(function*() {
      const server = yield* testServerOn(Sql.SqlTest, { corsOrigins: [APP, "https://other.example.test"] })
      const response = yield* Effect.promise(() => server.fetch("/v1/pets", preflight))
      expect(response.status).toBe(204)
      expect(response.headers.get("access-control-allow-origin")).toBe(APP)
      expect(response.headers.get("access-control-allow-methods")).toContain("POST")
      expect(response.headers.get("access-control-allow-headers")).toContain("authorization")

      const get = yield* Effect.promise(() =>
        server.fetch("/v1/pets", { headers: { origin: APP, authorization: `Bearer ${server.key}` } })
      )
      expect(get.status).toBe(200)
      expect(get.headers.get("access-control-allow-origin")).toBe(APP)
      expect(get.headers.get("access-control-expose-headers")).toContain("link")
      // An error answer is readable by the page too.
      const refused = yield* Effect.promise(() => server.fetch("/v1/pets", { headers: { origin: APP } }))
      expect(refused.status).toBe(401)
      expect(refused.headers.get("access-control-allow-origin")).toBe(APP)
      // Another origin is not allowed.
      const stranger = yield* Effect.promise(() =>
        server.fetch("/v1/pets", { headers: { origin: "https://evil.example.test" } })
      )
      expect(stranger.headers.get("access-control-allow-origin")).toBeNull()
    }))

  it.scoped("with CORS_ORIGINS, a preflight carries nosniff and every answer says Vary: Origin, whatever its origin", () =>
    Effect.gen(function*() {
      for (const origins of [[APP], ["*"]]) {
        const server = yield* testServerOn(Sql.SqlTest, { corsOrigins: origins })
        const answered = yield* Effect.promise(() => server.fetch("/v1/pets", preflight))
        expect(answered.status).toBe(204)
        expect(answered.headers.get("x-content-type-options")).toBe("nosniff")
        expect(answered.headers.get("vary")).toBe("Origin")
        const auth = { authorization: `Bearer ${server.key}` }
        for (const headers of [auth, { ...auth, origin: "https://evil.example.test" }, { ...auth, origin: APP }, {}]) {
          for (const path of ["/v1/pets", "/v1/pets/1", "/healthz", "/nowhere"]) {
            const response = yield* Effect.promise(() => server.fetch(path, { headers }))
            expect(response.headers.get("vary"), `${origins} ${path} ${JSON.stringify(headers)}`).toBe("Origin")
          }
        }
        // An answer that varies by more keeps what it says.
        const docs = yield* Effect.promise(() => server.fetch("/docs", { headers: { "accept-encoding": "gzip" } }))
        expect(docs.headers.get("vary")).toBe("Accept-Encoding, Origin")
      }
    }))

  it.scoped("with CORS_ORIGINS, a preflight from an origin it does not list is 403 origin_not_allowed, no CORS header", () =>
    Effect.gen(function*() {
      const server = yield* testServerOn(Sql.SqlTest, { corsOrigins: [APP] })
      const stranger = "https://evil.example.test"
      const response = yield* Effect.promise(() =>
        server.fetch("/v1/pets", { ...preflight, headers: { ...preflight.headers, origin: stranger } })
      )
      expect(response.status).toBe(403)
      expect(yield* Effect.promise(() => response.json())).toEqual({
        code: "origin_not_allowed",
        message: `The origin ${stranger} is not allowed: CORS_ORIGINS does not list it.`,
        status: 403
      })
      expect([...response.headers.keys()].filter((name) => name.startsWith("access-control-"))).toEqual([])
      expect(response.headers.get("vary")).toBe("Origin")
      // An OPTIONS without an Origin is no preflight: the route's 405.
      const { origin: _, ...noOrigin } = preflight.headers as Record<string, string>
      const bare = yield* Effect.promise(() => server.fetch("/v1/pets", { method: "OPTIONS", headers: noOrigin }))
      expect(bare.status).toBe(405)
    }))

  it.scoped("CORS_ORIGINS=* allows any origin", () =>
    Effect.gen(function*() {
      const server = yield* testServerOn(Sql.SqlTest, { corsOrigins: ["*"] })
      const response = yield* Effect.promise(() => server.fetch("/v1/pets", preflight))
      expect(response.headers.get("access-control-allow-origin")).toBe("*")
    }))
})

describe("size limits", () => {
  const expectError = (response: Response, status: number, code: string) =>
    Effect.gen(function*() {
      expect(response.status).toBe(status)
      expect(yield* Effect.promise(() => response.json())).toEqual({ code, message: expect.any(String), status })
      expect(response.headers.get("x-request-id")).not.toBeNull()
    })

  it.scoped("a URL over 8 KiB is 414 uri_too_long", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      const response = yield* Effect.promise(() => server.fetch(`/v1/pets?filler=${"a".repeat(9000)}`))
      yield* expectError(response, 414, "uri_too_long")
    }))

  it.scoped("headers over 8 KiB are 431 header_too_large", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      const response = yield* Effect.promise(() =>
        server.fetch("/v1/pets", { headers: { authorization: `Bearer ${server.key}`, "x-filler": "a".repeat(9000) } })
      )
      yield* expectError(response, 431, "header_too_large")
    }))

  it.scoped("just under the limits, the request is served", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      const response = yield* Effect.promise(() =>
        server.fetch(`/v1/pets?filler=${"a".repeat(7000)}`, { headers: { authorization: `Bearer ${server.key}` } })
      )
      expect(response.status).toBe(200)
    }))
})
