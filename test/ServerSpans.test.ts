/**
 * The telemetry of every route, exported to a real OTLP receiver and scraped from `/metrics`: one server span per
 * request whoever serves it (the pipeline or the platform's router, whose own tracer is off), carrying `url.path` and
 * never the query string or a request header's value; no series either; a `traceparent` with an all-zero trace id or
 * uppercase hex is not adopted.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Scope } from "effect"
import { randomBytes } from "node:crypto"
import * as Sql from "../src/Database/Sql.js"
import { ObservabilityLive } from "../src/Observability/Live.js"
import { SQLite } from "./support/backends.js"
import { testServerOn } from "./support/http.js"
import { freePort, withEnvironment } from "./support/observability.js"
import { otlpReceiver } from "./support/otlp.js"

/** Values that must not leave the process: in the query string, and in two headers no span should record. */
const QUERY_SECRET = "query-secret-4f1c"
const IDEMPOTENCY_SECRET = "idem-secret-93ab"
const PROXY_SECRET = "proxy-secret-d27e"

const SERVER = 2

describe("server spans of every route", () => {
  it.scoped("one server span per request, without the query string or a header's value; no such series", () =>
    Effect.gen(function*() {
      const receiver = yield* otlpReceiver
      const metricsPort = yield* freePort
      const url = yield* SQLite.freshDatabase
      const scope = yield* Scope.make()
      const server = yield* testServerOn(
        Sql.layer(url).pipe(Layer.provideMerge(ObservabilityLive("9.9.9"))),
        { corsOrigins: ["https://app.example"] }
      ).pipe(
        withEnvironment({
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
          OTEL_METRIC_EXPORT_INTERVAL: "600000",
          METRICS_ADDRESS: `127.0.0.1:${metricsPort}`
        }),
        Scope.extend(scope)
      )
      const sent = {
        "idempotency-key": IDEMPOTENCY_SECRET,
        "proxy-authorization": `Basic ${PROXY_SECRET}`,
        "user-agent": "spans-test",
        authorization: `Bearer ${server.key}`
      }
      const query = `?token=${QUERY_SECRET}`
      const requests: ReadonlyArray<readonly [string, string, RequestInit?]> = [
        ["POST", "/v1/pets", {
          headers: { ...sent, "content-type": "application/json" },
          body: JSON.stringify({ name: "Rex", categoryId: 1 })
        }],
        ["GET", "/v1/pets"],
        ["GET", "/v1/pets/1"],
        ["HEAD", "/v1/pets/1"],
        ["GET", "/v1/pets/999"],
        ["DELETE", "/v1/pets"],
        ["OPTIONS", "/v1/pets", {
          headers: { ...sent, origin: "https://app.example", "access-control-request-method": "POST" }
        }],
        ["GET", "/healthz"],
        ["HEAD", "/healthz"],
        ["GET", "/readyz"],
        ["GET", "/openapi.json"],
        ["GET", "/"],
        ["GET", "/docs"],
        ["GET", "/nowhere"]
      ]
      for (const [method, path, init] of requests) {
        const response = yield* Effect.promise(() =>
          server.fetch(`${path}${query}`, { method, headers: sent, ...init })
        )
        expect(response.status, `${method} ${path}`).toBeLessThan(500)
      }
      // Two traceparents the request's span refuses (an all-zero trace id, uppercase hex): a trace of its own each.
      const upper = randomBytes(16).toString("hex").toUpperCase().replace(/[0-9]/, "A")
      const clientSpan = randomBytes(8).toString("hex")
      const refused = [`00-${"0".repeat(32)}-${clientSpan}-01`, `00-${upper}-${clientSpan}-01`]
      for (const traceparent of refused) {
        for (const path of ["/healthz", "/v1/pets"]) {
          yield* Effect.promise(() => server.fetch(path, { headers: { ...sent, traceparent } }))
        }
      }
      const scraped = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text())
      )
      yield* Scope.close(scope, Exit.void) // the exporters' last flush

      const servers = receiver.spans.filter((span) => span.kind === SERVER)
      expect(servers.map((span) => span.name).sort()).toEqual([
        ...requests.map(([method, path]) =>
          path === "/nowhere"
            ? method
            : `${method} ${path === "/v1/pets/1" || path.endsWith("999") ? "/v1/pets/{petId}" : path}`
        ),
        "GET /healthz",
        "GET /v1/pets",
        "GET /healthz",
        "GET /v1/pets"
      ].sort())
      for (const span of servers) {
        expect(span.attributes["url.path"], span.name).not.toContain("?")
      }
      for (const span of receiver.spans) {
        const keys = Object.keys(span.attributes)
        expect(
          keys.filter((key) => key === "url.full" || key === "url.query" || key.startsWith("http.request.header."))
        )
          .toEqual([])
        expect(span.traceId).not.toBe("0".repeat(32))
        expect(span.traceId.toLowerCase()).not.toBe(upper.toLowerCase())
        expect(span.parentSpanId).not.toBe(clientSpan)
      }
      const exported = receiver.bodies.map((body) => body.text).join("\n") + scraped
      expect(receiver.bodies.some((body) => body.path === "/v1/metrics")).toBe(true)
      for (const secret of [QUERY_SECRET, IDEMPOTENCY_SECRET, PROXY_SECRET]) {
        expect(exported).not.toContain(secret)
      }
    }))
})
