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
import { makeSpanExporter } from "./SpanExporter.js"
import { makeTracer, type RecordingSpan, type SamplingTracer } from "./Tracer.js"

const transport = (options: OtlpOptions) =>
  Layer.mergeAll(
    FetchHttpClient.layer,
    options.protocol === "http/json" ? OtlpSerialization.layerJson : OtlpSerialization.layerProtobuf
  )

/**
 * How a batch of spans is written: `http/protobuf` straight from the spans (`OtlpTracesProtobuf.ts`, the library's
 * bytes at a fraction of its cost), `http/json` through the OTLP/JSON shape and the library's serialization.
 */
const tracesEncoder = (options: OtlpOptions, resource: OtlpResource.Resource) =>
  Effect.map(OtlpSerialization.OtlpSerialization, (library) => {
    const scope = { name: OtlpResource.unsafeServiceName(resource) }
    if (options.protocol === "http/json") {
      return (spans: ReadonlyArray<RecordingSpan>) =>
        library.traces({ resourceSpans: [{ resource, scopeSpans: [{ scope, spans: spans.map(toOtlp) }] }] })
    }
    const encode = makeTracesEncoder(resource, scope)
    return (spans: ReadonlyArray<RecordingSpan>) => HttpBody.uint8Array(encode(spans), "application/x-protobuf")
  })

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
    const sink = yield* makeSpanExporter({
      url: options.tracesUrl,
      headers: Redacted.value(options.headers),
      encode: yield* tracesEncoder(options, OtlpResource.make(resourceOf(options, version))),
      timeoutMillis: options.timeoutMillis,
      maxQueueSize: options.maxQueueSize,
      maxExportBatchSize: options.maxExportBatchSize,
      scheduleDelayMillis: options.scheduleDelayMillis
    })
    return makeTracer(makeSampler(options.sampling), sink)
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
