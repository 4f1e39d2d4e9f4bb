/**
 * Observability of the compiled executable: `/metrics` on METRICS_ADDRESS (not the API's port), spans sent to an OTLP
 * receiver and flushed by the SIGTERM drain, and a collector that is down changing nothing for clients.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { getMetricsFromIterator } from "prom2javascript"
import { secretOf } from "../support/keys.js"
import { otlpReceiver } from "../support/otlp.js"
import { createKey, freePort, scratchDirectory, startPetstore, stopAll } from "./support/petstore.js"

const withReceiver = async <A>(f: (receiver: Effect.Effect.Success<typeof otlpReceiver>) => Promise<A>) => {
  const scope = Effect.runSync(Scope.make())
  try {
    return await f(await Effect.runPromise(Scope.extend(otlpReceiver, scope)))
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

describe("observability of the executable", () => {
  afterAll(stopAll)

  it("serves /metrics on its own port, exports spans over OTLP, and flushes them during the SIGTERM drain", () =>
    withReceiver(async (receiver) => {
      const database = `${scratchDirectory()}/observed.db`
      const { key } = createKey(database)
      const start = async (attempt: number): Promise<readonly [number, Awaited<ReturnType<typeof startPetstore>>]> => {
        const metricsPort = await freePort()
        try {
          const server = await startPetstore({
            database,
            env: {
              METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
              OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
              OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
              // Nothing leaves before the drain: what the receiver gets, the drain's flush sent.
              OTEL_BSP_SCHEDULE_DELAY: "600000",
              OTEL_METRIC_EXPORT_INTERVAL: "600000",
              TRACING: "on"
            }
          })
          return [metricsPort, server]
        } catch (error) {
          // Another test may have taken the metrics port between its choice and the listen.
          if (attempt < 3 && /METRICS_ADDRESS/.test(String(error))) return start(attempt + 1)
          throw error
        }
      }
      const [metricsPort, server] = await start(1)
      expect(metricsPort).not.toBe(server.port)
      const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
      const traceparent = `00-${traceId}-00f067aa0ba902b7-01`
      for (let i = 0; i < 3; i++) {
        const response = await fetch(`${server.origin}/v1/pets`, {
          headers: { authorization: `Bearer ${key}`, traceparent, "x-request-id": `traced-${i}` }
        })
        expect(response.status).toBe(200)
      }
      expect((await fetch(`${server.origin}/metrics`)).status).toBe(404)
      const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()
      const metrics = await getMetricsFromIterator(text.split("\n")[Symbol.iterator]())
      expect(metrics["petstore_build_info"].data[0]).toMatchObject({
        labels: { version: expect.any(String) },
        value: 1
      })
      expect(metrics["petstore_draining"].data[0]).toMatchObject({ value: 0 })
      expect(metrics["process_resident_memory_bytes"].type).toBe("gauge")
      const listed = (metrics["http_server_request_duration_seconds"].data as Array<any>).find((series) =>
        series.labels.http_route === "/v1/pets" && series.labels.http_response_status_code === "200"
      )
      expect(listed.count).toBe(3)
      expect(receiver.spans).toEqual([])

      expect((await server.kill("SIGTERM")).code).toBe(0)
      // Sent by the drain's flush: the three requests' server spans and their statements, in the client's trace.
      const servers = receiver.spans.filter((span) => span.name === "GET /v1/pets")
      expect(servers).toHaveLength(3)
      for (const span of servers) {
        expect(span).toMatchObject({
          traceId,
          parentSpanId: "00f067aa0ba902b7",
          resource: { "service.name": "petstore" }
        })
        expect(receiver.spans.some((child) => child.parentSpanId === span.spanId && child.name === "SELECT pets")).toBe(
          true
        )
      }
      const requestLines = server.output().split("\n").filter((line) => line.includes("\"traced-"))
        .map((line) => JSON.parse(line).annotations)
      expect(requestLines).toHaveLength(3)
      for (const line of requestLines) {
        expect(line.traceId).toBe(traceId)
        expect(servers.map((span) => span.spanId)).toContain(line.spanId)
      }
      expect(server.output()).toContain("TRACING is no longer read")
      for (const body of receiver.bodies) expect(body.text).not.toContain(secretOf(key))
    }))

  it("with the collector down, requests answer as usual and the process stops cleanly", async () => {
    const database = `${scratchDirectory()}/down.db`
    const { key } = createKey(database)
    const server = await startPetstore({
      database,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${await freePort()}`, OTEL_BSP_SCHEDULE_DELAY: "100" }
    })
    for (let i = 0; i < 20; i++) {
      const response = await fetch(`${server.origin}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
      expect(response.status).toBe(200)
    }
    expect((await server.kill("SIGTERM")).code).toBe(0)
    expect(server.output()).toContain("OTLP export failed")
  })
})
