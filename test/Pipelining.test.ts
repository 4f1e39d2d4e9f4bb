/**
 * HTTP/1.1 pipelining as Bun's listener (uWebSockets) handles it: a request that arrives on a connection while the
 * answer ahead of it is still pending makes Bun close the connection, and both answers are lost, though the first
 * request may have been served (oven-sh/bun PR #38128). Not petstore's to patch: `docs/operations.md` tells operators to put a
 * proxy in front when clients pipeline. This test pins Bun's behaviour so that the day it changes, it says so.
 */
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { describeBackends } from "./support/backends.js"
import { testServer } from "./support/http.js"
import { listening, requestText, sendRaw } from "./support/wire.js"

const FIXED = "Bun now answers a request pipelined behind a pending one (oven-sh/bun PR #38128 landed?): " +
  "update the pipelining paragraph of docs/operations.md, then this test"

describeBackends((backend) => {
  it.scoped("Bun's listener, a request pipelined behind a pending create: the connection closes, neither is answered", () =>
    Effect.gen(function*() {
      const server = yield* testServer(backend)
      const port = yield* listening(server.handler)
      const auth = { authorization: `Bearer ${server.key}`, connection: "keep-alive" }
      // One write: the create (pending while its body is read and its row committed), then a second request.
      const create = requestText(
        "POST",
        "/v1/pets",
        { ...auth, "content-type": "application/json", "idempotency-key": "pipelined-1" },
        JSON.stringify({ name: "Piped", categoryId: 1 })
      )
      const received = yield* sendRaw(port, create + requestText("GET", "/healthz"))
      const answers = received.bytes.toString("latin1").match(/^HTTP\/1\.1 \d{3}/gm) ?? []
      expect(answers, FIXED).toEqual([])
      expect(received.closedByServer, FIXED).toBe(true)
      // Whether the create got as far as its commit before the connection closed depends on where it was: a retry
      // with its Idempotency-Key gets the pet made once either way.
      const retried = yield* Effect.promise(() =>
        server.fetch("/v1/pets", {
          method: "POST",
          headers: { ...auth, "content-type": "application/json", "idempotency-key": "pipelined-1" },
          body: JSON.stringify({ name: "Piped", categoryId: 1 })
        })
      )
      expect(retried.status).toBe(201)
      const pets = yield* Effect.promise(() => server.fetch("/v1/pets", { headers: auth }).then((r) => r.json()))
      expect(pets).toMatchObject([{ name: "Piped" }])
    }))
})
