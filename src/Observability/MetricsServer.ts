/**
 * `GET /metrics` on `METRICS_ADDRESS`: a Bun listener of its own, never the API's port, so that the metrics are not
 * exposed where the API is and a scrape never queues behind API traffic in the pipeline.
 */
import { Effect, Layer } from "effect"
import { refreshProcessMetrics } from "./Metrics.js"
import { CONTENT_TYPE, render } from "./Prometheus.js"

export interface MetricsAddress {
  readonly hostname: string
  readonly port: number
}

const answer = (request: Request): Response => {
  const path = new URL(request.url).pathname
  if (path !== "/metrics") return new Response("Not found: the metrics are at /metrics\n", { status: 404 })
  if (request.method !== "GET" && request.method !== "HEAD") {
    return new Response("Method not allowed\n", { status: 405, headers: { allow: "GET, HEAD" } })
  }
  refreshProcessMetrics()
  const text = render()
  if (request.method === "GET") return new Response(text, { headers: { "content-type": CONTENT_TYPE } })
  // A HEAD: the GET's headers, its length among them, without the body (RFC 9110 §9.3.2).
  return new Response(null, {
    headers: { "content-type": CONTENT_TYPE, "content-length": String(Buffer.byteLength(text)) }
  })
}

/** Serves the metrics for the life of the layer; it closes after the layers that depend on it (the API's drain). */
export const MetricsServerLive = (address: MetricsAddress) =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const server = yield* Effect.acquireRelease(
      Effect.try({
        try: () => Bun.serve({ hostname: address.hostname, port: address.port, fetch: answer }),
        catch: (cause) =>
          new Error(
            `Cannot serve the metrics on METRICS_ADDRESS ${address.hostname}:${address.port}: ${
              cause instanceof Error ? cause.message : String(cause)
            }`
          )
      }),
      (server) => Effect.promise(() => server.stop(true))
    )
    yield* Effect.logInfo("metrics are served").pipe(Effect.annotateLogs("address", `${server.url.href}metrics`))
  }))
