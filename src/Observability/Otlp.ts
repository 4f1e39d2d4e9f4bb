/**
 * OTLP over HTTP with `@effect/opentelemetry`: its tracer (`OtlpTracer`, behind the sampler of `Tracer.ts`) and its
 * metrics export (`OtlpMetrics`), serialized as `OTEL_EXPORTER_OTLP_PROTOCOL` says (the traces' protobuf by
 * `OtlpTracesProtobuf.ts`), sent with the platform's fetch client, the spans' exports bounded and what becomes of
 * them counted (`OtlpSpanCounts.ts`). Loaded only when an endpoint is configured.
 */
import * as OtlpMetrics from "@effect/opentelemetry/OtlpMetrics"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import { FetchHttpClient, HttpClient, HttpClientError } from "@effect/platform"
import { Cause, ConfigProvider, Duration, Effect, Layer, Redacted } from "effect"
import type { OtlpOptions } from "./Config.js"
import { addSpanCounts, refreshProcessMetrics } from "./Metrics.js"
import { makeSpanCounts } from "./OtlpSpanCounts.js"
import * as OtlpTracesProtobuf from "./OtlpTracesProtobuf.js"
import { makeSampler, makeSamplingTracer } from "./Tracer.js"

/**
 * The serialization `OTEL_EXPORTER_OTLP_PROTOCOL` names, and the fetch client, each export bounded by
 * `OTEL_EXPORTER_OTLP_TIMEOUT`, with one warning when the collector stops taking what is sent (what it did not take is
 * dropped) and one line when it takes it again. The reason is the error's message alone, never the request, whose
 * headers may carry credentials.
 */
const transport = (options: OtlpOptions) =>
  Layer.mergeAll(
    options.protocol === "http/json" ? OtlpSerialization.layerJson : OtlpTracesProtobuf.layerProtobuf,
    Layer.effect(
      HttpClient.HttpClient,
      Effect.map(HttpClient.HttpClient, (client) => {
        let failing = false
        const failed = (url: string, reason: string) => {
          if (failing) return Effect.void
          failing = true
          return Effect.logWarning("OTLP export failed: what is sent is dropped until the collector answers").pipe(
            Effect.annotateLogs({ url, reason })
          )
        }
        return HttpClient.transform(client, (effect, request) =>
          effect.pipe(
            Effect.timeoutFail({
              duration: Duration.millis(options.timeoutMillis),
              onTimeout: () =>
                new HttpClientError.RequestError({ request, reason: "Transport", description: "timeout" })
            }),
            Effect.tapErrorCause((cause) => {
              const error = Cause.squash(cause)
              return failed(request.url, error instanceof Error ? `${error.name}: ${error.message}` : String(error))
            }),
            Effect.tap((response) => {
              if (response.status >= 300) return failed(request.url, `status ${response.status}`)
              if (!failing) return Effect.void
              failing = false
              return Effect.logInfo("OTLP export: the collector takes data again")
            })
          ))
      })
    ).pipe(Layer.provide(FetchHttpClient.layer))
  )

/**
 * What both exporters take. Their resource is the one `Config.ts` reads: the service's name and version, and the other
 * attributes of `OTEL_RESOURCE_ATTRIBUTES`, each once.
 */
const exporter = (options: OtlpOptions, version: string) => {
  const { "service.name": _name, "service.version": _version, ...attributes } = options.resourceAttributes
  return {
    resource: { serviceName: options.serviceName, serviceVersion: version, attributes },
    headers: Redacted.value(options.headers),
    shutdownTimeout: Duration.millis(options.timeoutMillis)
  }
}

/**
 * No environment for the library's own reading of the resource: it would read `OTEL_RESOURCE_ATTRIBUTES` again, without
 * percent-decoding, and add its `service.name` and `service.version` to the ones given.
 */
const NO_ENVIRONMENT = ConfigProvider.fromMap(new Map())

/**
 * The sampling tracer, exporting to `tracesUrl`; its exporter's last flush runs when the scope closes, and then its
 * span counts are read a last time.
 */
export const makeOtlpTracer = (options: OtlpOptions, version: string) =>
  Effect.gen(function*() {
    const clock = yield* Effect.clock
    const counted = makeSpanCounts(options.maxQueueSize)
    yield* Effect.acquireRelease(Effect.sync(() => addSpanCounts(counted.counts)), (stop) => Effect.sync(stop))
    const recording = yield* OtlpTracer.make({
      ...exporter(options, version),
      url: options.tracesUrl,
      exportInterval: Duration.millis(options.scheduleDelayMillis),
      maxBatchSize: options.maxExportBatchSize
    }).pipe(
      Effect.withConfigProvider(NO_ENVIRONMENT),
      Effect.provideService(HttpClient.HttpClient, counted.client(yield* HttpClient.HttpClient)),
      Effect.provideService(
        OtlpSerialization.OtlpSerialization,
        counted.serialization(yield* OtlpSerialization.OtlpSerialization)
      )
    )
    return makeSamplingTracer(makeSampler(options.sampling), counted.tracer(recording), clock)
  }).pipe(Effect.provide(transport(options)))

/** The registry exported every `OTEL_METRIC_EXPORT_INTERVAL`, the process figures read between exports. */
export const OtlpMetricsLive = (options: OtlpOptions, version: string) =>
  Layer.mergeAll(
    OtlpMetrics.layer({
      ...exporter(options, version),
      url: options.metricsUrl,
      exportInterval: Duration.millis(options.metricExportIntervalMillis)
    }).pipe(Layer.provide(Layer.setConfigProvider(NO_ENVIRONMENT))),
    Layer.scopedDiscard(
      Effect.sync(refreshProcessMetrics).pipe(
        Effect.zipRight(Effect.sleep(Duration.millis(Math.max(1000, options.metricExportIntervalMillis / 2)))),
        Effect.forever,
        Effect.forkScoped
      )
    )
  ).pipe(Layer.provide(transport(options)), Layer.annotateLogs("module", "OtlpMetrics"))
