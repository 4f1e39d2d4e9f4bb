/**
 * OTLP over HTTP: the tracer with its exporter, and the metrics through `@effect/opentelemetry`'s `OtlpMetrics`, sent
 * with the platform's fetch `HttpClient`, encoded as `OTEL_EXPORTER_OTLP_PROTOCOL` says. Loaded (a dynamic import) only
 * when an endpoint is configured.
 */
import * as OtlpMetrics from "@effect/opentelemetry/OtlpMetrics"
import * as OtlpResource from "@effect/opentelemetry/OtlpResource"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import { FetchHttpClient, HttpBody } from "@effect/platform"
import { Duration, Effect, Layer, Redacted } from "effect"
import type { OtlpOptions } from "./Config.js"
import { refreshProcessMetrics } from "./Metrics.js"
import { toOtlp } from "./OtlpSpans.js"
import { makeTracesEncoder } from "./OtlpTracesProtobuf.js"
import { makeSampler } from "./Sampler.js"
import { makeSpanExporter, type SpanEncoding } from "./SpanExporter.js"
import { makeTracer, type SamplingTracer } from "./Tracer.js"

const transport = (options: OtlpOptions) =>
  Layer.mergeAll(
    FetchHttpClient.layer,
    options.protocol === "http/json" ? OtlpSerialization.layerJson : OtlpSerialization.layerProtobuf
  )

const scopeOf = (resource: OtlpResource.Resource) => ({ name: OtlpResource.unsafeServiceName(resource) })

/**
 * `http/protobuf`: each span written straight to its `Span` message in its batch's buffer (`OtlpTracesProtobuf.ts`,
 * the library's bytes at a fraction of its cost), the request around them.
 */
export const protobufEncoding = (resource: OtlpResource.Resource): SpanEncoding => {
  const encoder = makeTracesEncoder(resource, scopeOf(resource))
  return {
    batch: () => {
      const batch = encoder.batch()
      return {
        get size() {
          return batch.size
        },
        add: batch.add,
        body: () => HttpBody.uint8Array(batch.request(), "application/x-protobuf")
      }
    }
  }
}

/**
 * `http/json`: each span the text of its OTLP/JSON shape, the request's text around them — what the library's JSON
 * serialization (`JSON.stringify` of the whole request) writes.
 */
export const jsonEncoding = (resource: OtlpResource.Resource): SpanEncoding => {
  const head = `{"resourceSpans":[{"resource":${JSON.stringify(resource)},"scopeSpans":[{"scope":${
    JSON.stringify(scopeOf(resource))
  },"spans":[`
  return {
    batch: () => {
      const spans: Array<string> = []
      return {
        get size() {
          return spans.length
        },
        add: (span) => {
          spans.push(JSON.stringify(toOtlp(span)))
        },
        body: () => HttpBody.text(`${head}${spans.join(",")}]}]}]}`, "application/json")
      }
    }
  }
}

const resourceOf = (options: OtlpOptions, version: string) => ({
  serviceName: options.serviceName,
  serviceVersion: version,
  attributes: options.resourceAttributes
})

/** The tracer, exporting to `tracesUrl`; its exporter's last flush runs when the scope closes. */
export const makeOtlpTracer = (
  options: OtlpOptions,
  version: string
): Effect.Effect<SamplingTracer, never, import("effect").Scope.Scope> =>
  Effect.gen(function*() {
    const resource = OtlpResource.make(resourceOf(options, version))
    const sink = yield* makeSpanExporter({
      url: options.tracesUrl,
      headers: Redacted.value(options.headers),
      encoding: options.protocol === "http/json" ? jsonEncoding(resource) : protobufEncoding(resource),
      timeoutMillis: options.timeoutMillis,
      maxQueueSize: options.maxQueueSize,
      maxExportBatchSize: options.maxExportBatchSize,
      scheduleDelayMillis: options.scheduleDelayMillis
    })
    return makeTracer(makeSampler(options.sampling), sink, yield* Effect.clock)
  }).pipe(Effect.provide(transport(options)))

/** The metric registry exported every `OTEL_METRIC_EXPORT_INTERVAL`, the process figures read just before. */
export const OtlpMetricsLive = (options: OtlpOptions, version: string) =>
  Layer.mergeAll(
    OtlpMetrics.layer({
      url: options.metricsUrl,
      resource: resourceOf(options, version),
      headers: Redacted.value(options.headers),
      exportInterval: Duration.millis(options.metricExportIntervalMillis),
      shutdownTimeout: Duration.millis(options.timeoutMillis)
    }),
    Layer.scopedDiscard(
      Effect.sync(refreshProcessMetrics).pipe(
        Effect.zipRight(Effect.sleep(Duration.millis(Math.max(1000, options.metricExportIntervalMillis / 2)))),
        Effect.forever,
        Effect.forkScoped
      )
    )
  ).pipe(Layer.provide(transport(options)), Layer.annotateLogs("module", "OtlpMetrics"))
