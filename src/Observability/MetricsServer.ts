/**
 * `GET /metrics` on `METRICS_ADDRESS`: Effect's metric registry in the Prometheus text format, rendered when scraped, on
 * a Bun listener of its own, never the API's port, so that the metrics are not exposed where the API is and a scrape
 * never queues behind API traffic.
 */
import { Effect, Layer, Metric, MetricState, Option } from "effect"
import type { MetricKey, MetricLabel } from "effect"
import { refreshProcessMetrics } from "./Metrics.js"

const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

/** Prometheus names and label names: `[a-zA-Z_:][a-zA-Z0-9_:]*` (labels without `:`). */
const metricName = (name: string) => name.replace(/[^a-zA-Z0-9_:]/g, "_").replace(/^([0-9])/, "_$1")
const labelName = (name: string) => name.replace(/[^a-zA-Z0-9_]/g, "_").replace(/^([0-9])/, "_$1")
const labelValue = (value: string) => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, "\\\"")
const helpText = (text: string) => text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")

const number = (value: number | bigint): string => {
  if (typeof value === "bigint") return value.toString()
  if (Number.isNaN(value)) return "NaN"
  if (value === Infinity) return "+Inf"
  if (value === -Infinity) return "-Inf"
  return String(value)
}

const labels = (tags: ReadonlyArray<MetricLabel.MetricLabel>, extra?: readonly [string, string]): string => {
  const parts = tags.map((tag) => `${labelName(tag.key)}="${labelValue(tag.value)}"`)
  if (extra !== undefined) parts.push(`${extra[0]}="${labelValue(extra[1])}"`)
  return parts.length === 0 ? "" : `{${parts.join(",")}}`
}

interface Family {
  type: "counter" | "gauge" | "histogram"
  help: string | undefined
  lines: Array<string>
}

/** Effect's metric registry in the Prometheus text format 0.0.4, series of one name under one `# TYPE`. */
const render = (): string => {
  const families = new Map<string, Family>()
  const family = (key: MetricKey.MetricKey.Untyped, type: Family["type"]) => {
    const name = metricName(key.name)
    let found = families.get(name)
    if (found === undefined) {
      found = { type, help: Option.getOrUndefined(key.description), lines: [] }
      families.set(name, found)
    }
    return { name, lines: found.lines }
  }
  for (const { metricKey, metricState } of Metric.unsafeSnapshot()) {
    // Effect's fiber metrics count the start-up's fibers only (requests run with them off): left out, not misleading.
    if (metricKey.name.startsWith("effect_fiber_")) continue
    const tags = metricKey.tags
    if (MetricState.isCounterState(metricState)) {
      const { lines, name } = family(metricKey, "counter")
      lines.push(`${name}${labels(tags)} ${number(metricState.count)}`)
    } else if (MetricState.isGaugeState(metricState)) {
      const { lines, name } = family(metricKey, "gauge")
      lines.push(`${name}${labels(tags)} ${number(metricState.value)}`)
    } else if (MetricState.isHistogramState(metricState)) {
      const { lines, name } = family(metricKey, "histogram")
      // Effect's buckets are cumulative already, and end with +Inf.
      for (const [bound, count] of metricState.buckets) {
        lines.push(`${name}_bucket${labels(tags, ["le", number(bound)])} ${count}`)
      }
      lines.push(`${name}_sum${labels(tags)} ${number(metricState.sum)}`)
      lines.push(`${name}_count${labels(tags)} ${metricState.count}`)
    }
    // Frequencies and summaries: petstore keeps none.
  }
  let text = ""
  for (const [name, { help, lines, type }] of families) {
    if (help !== undefined && help !== "") text += `# HELP ${name} ${helpText(help)}\n`
    text += `# TYPE ${name} ${type}\n${lines.join("\n")}\n`
  }
  return text
}

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
