/**
 * A HEAD gets what the GET to the same target would, without the body (RFC 9110 §9.3.2): the same status and headers,
 * `Content-Length` the GET's body length — on the wire, from Bun's listener, for every route the server answers and
 * for its refusals.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { makeTestServer } from "./support/http.js"
import { listening, parseHead, requestText, sendRaw } from "./support/wire.js"

/** Headers that differ from one answer to the next whatever the method. */
const PER_ANSWER = new Set(["x-request-id", "date"])

const comparable = (headers: Record<string, string>) =>
  Object.fromEntries(Object.entries(headers).filter(([name]) => !PER_ANSWER.has(name)))

describe("HEAD", () => {
  it.scoped("answers the GET's status and headers, its length included, and no body", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      const auth = { authorization: `Bearer ${server.key}` }
      const created = yield* Effect.promise(() =>
        server.fetch("/v1/pets", {
          method: "POST",
          headers: { ...auth, "content-type": "application/json" },
          body: JSON.stringify({ name: "Rex", categoryId: 1 })
        })
      )
      expect(created.status).toBe(201)
      const port = yield* listening(server.handler)
      const targets: ReadonlyArray<readonly [string, Record<string, string>?]> = [
        ["/v1/pets/1", auth],
        ["/v1/pets?limit=1", auth],
        ["/v1/pets/999", auth],
        ["/v1/pets/abc", auth],
        ["/v1/pets"],
        ["/healthz"],
        ["/readyz"],
        ["/openapi.json"],
        ["/"],
        ["/docs"],
        ["/docs", { "accept-encoding": "gzip" }],
        ["/nowhere"]
      ]
      for (const [target, headers] of targets) {
        const get = parseHead((yield* sendRaw(port, requestText("GET", target, headers))).bytes)
        const received = yield* sendRaw(port, requestText("HEAD", target, headers))
        const head = parseHead(received.bytes)
        expect(received.closedByServer, target).toBe(true)
        expect(head.rest.length, `${target}: a HEAD's answer has no body`).toBe(0)
        expect({ target, status: head.status, headers: comparable(head.headers) }).toEqual({
          target,
          status: get.status,
          headers: comparable(get.headers)
        })
        if (get.headers["transfer-encoding"] === undefined) {
          expect(Number(head.headers["content-length"]), target).toBe(get.rest.length)
        }
      }
      const pet = parseHead((yield* sendRaw(port, requestText("HEAD", "/v1/pets/1", auth))).bytes)
      expect(Number(pet.headers["content-length"])).toBeGreaterThan(0)
    }))
})
