/**
 * `GET /metrics` on `METRICS_ADDRESS`: Effect's metric registry in the Prometheus text format 0.0.4, rendered when
 * scraped, on a Bun listener of its own, so that the metrics are not exposed where the API is and a scrape never queues
 * behind API traffic.
 */
import { Effect, Layer, Metric, type MetricLabel, MetricState, Option } from "effect"
import { refreshProcessMetrics } from "./Metrics.js"

// The metrics' names, label names and descriptions are petstore's own, written in Prometheus' form: only label values
// are escaped.
const labelValue = (value: string) => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, "\\\"")
const number = (value: number | bigint): string =>
  Number.isNaN(value) ? "NaN" : value === Infinity ? "+Inf" : value === -Infinity ? "-Inf" : String(value)

const labels = (tags: ReadonlyArray<MetricLabel.MetricLabel>, le?: string): string => {
  const parts = tags.map((tag) => `${tag.key}="${labelValue(tag.value)}"`)
  if (le !== undefined) parts.push(`le="${le}"`)
  return parts.length === 0 ? "" : `{${parts.join(",")}}`
}

/** A series' type and lines; `undefined` for frequencies and summaries (petstore keeps none). */
const samples = (
  name: string,
  tags: ReadonlyArray<MetricLabel.MetricLabel>,
  state: MetricState.MetricState.Untyped
) => {
  const at = labels(tags)
  if (MetricState.isCounterState(state)) return ["counter", [`${name}${at} ${number(state.count)}`]] as const
  if (MetricState.isGaugeState(state)) return ["gauge", [`${name}${at} ${number(state.value)}`]] as const
  if (!MetricState.isHistogramState(state)) return undefined
  // Effect's buckets are cumulative already, and end with +Inf.
  const buckets = state.buckets.map(([bound, count]) => `${name}_bucket${labels(tags, number(bound))} ${count}`)
  return ["histogram", [
    ...buckets,
    `${name}_sum${at} ${number(state.sum)}`,
    `${name}_count${at} ${state.count}`
  ]] as const
}

/** The registry, the series of one name under one `# TYPE`. */
const render = (): string => {
  const families = new Map<string, { readonly head: string; readonly lines: Array<string> }>()
  for (const { metricKey, metricState } of Metric.unsafeSnapshot()) {
    // Effect's fiber metrics count the start-up's fibers only (requests run with them off): left out, not misleading.
    const { name } = metricKey
    if (name.startsWith("effect_fiber_")) continue
    const found = samples(name, metricKey.tags, metricState)
    if (found === undefined) continue
    let family = families.get(name)
    if (family === undefined) {
      const help = Option.getOrElse(metricKey.description, () => "")
      const head = `${help === "" ? "" : `# HELP ${name} ${help}\n`}# TYPE ${name} ${found[0]}\n`
      families.set(name, family = { head, lines: [] })
    }
    family.lines.push(...found[1])
  }
  return [...families.values()].map(({ head, lines }) => `${head}${lines.join("\n")}\n`).join("")
}

const answer = (request: Request): Response => {
  if (new URL(request.url).pathname !== "/metrics") {
    return new Response("Not found: the metrics are at /metrics\n", { status: 404 })
  }
  if (request.method !== "GET" && request.method !== "HEAD") {
    return new Response("Method not allowed\n", { status: 405, headers: { allow: "GET, HEAD" } })
  }
  refreshProcessMetrics()
  // Bun answers a HEAD with the GET's headers, its length among them, and no body (RFC 9110 §9.3.2).
  return new Response(render(), { headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" } })
}

/** Serves the metrics for the life of the layer; it closes after the layers that depend on it (the API's drain). */
export const MetricsServerLive = ({ hostname, port }: { readonly hostname: string; readonly port: number }) =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const server = yield* Effect.acquireRelease(
      Effect.try({
        try: () => Bun.serve({ hostname, port, fetch: answer }),
        catch: (cause) =>
          new Error(
            `Cannot serve the metrics on METRICS_ADDRESS ${hostname}:${port}: ${
              cause instanceof Error ? cause.message : String(cause)
            }`
          )
      }),
      (server) => Effect.promise(() => server.stop(true))
    )
    yield* Effect.logInfo("metrics are served").pipe(Effect.annotateLogs("address", `${server.url.href}metrics`))
  }))
