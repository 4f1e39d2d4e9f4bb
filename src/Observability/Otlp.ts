/**
 * OTLP over HTTP with `@effect/opentelemetry`: its tracer (`OtlpTracer`, behind the sampler of `Tracer.ts`) and its
 * metric export (`OtlpMetrics`), serialized as `OTEL_EXPORTER_OTLP_PROTOCOL` says (`OtlpSerialization`; the traces'
 * protobuf by `OtlpTracesProtobuf.ts`), sent with the platform's fetch client, each export bounded by
 * `OTEL_EXPORTER_OTLP_TIMEOUT`. Loaded (a dynamic import) only when an endpoint is configured.
 */
import * as OtlpMetrics from "@effect/opentelemetry/OtlpMetrics"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import { FetchHttpClient, HttpClient, HttpClientError } from "@effect/platform"
import { Cause, Duration, Effect, Layer, Redacted, type Scope } from "effect"
import type { OtlpOptions } from "./Config.js"
import { refreshProcessMetrics } from "./Metrics.js"
import * as OtlpTracesProtobuf from "./OtlpTracesProtobuf.js"
import { makeSampler, makeSamplingTracer, type SamplingTracer } from "./Tracer.js"

/** The error's message alone (not the request, whose headers may carry credentials). */
const reasonOf = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error)
}

/**
 * The fetch client, each request bounded by the timeout, and one warning in the log when the collector stops taking
 * what is sent (the library drops it), one line when it takes it again.
 */
const exportClient = (options: OtlpOptions) =>
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
            onTimeout: () => new HttpClientError.RequestError({ request, reason: "Transport", description: "timeout" })
          }),
          Effect.tapErrorCause((cause) => failed(request.url, reasonOf(cause))),
          Effect.tap((response) => {
            if (response.status >= 300) return failed(request.url, `status ${response.status}`)
            if (!failing) return Effect.void
            failing = false
            return Effect.logInfo("OTLP export: the collector takes data again")
          })
        ))
    })
  ).pipe(Layer.provide(FetchHttpClient.layer))

const transport = (options: OtlpOptions) =>
  Layer.mergeAll(
    exportClient(options),
    options.protocol === "http/json" ? OtlpSerialization.layerJson : OtlpTracesProtobuf.layerProtobuf
  )

const resourceOf = (options: OtlpOptions, version: string) => ({
  serviceName: options.serviceName,
  serviceVersion: version,
  attributes: options.resourceAttributes
})

/** The sampling tracer, exporting to `tracesUrl`; its exporter's last flush runs when the scope closes. */
export const makeOtlpTracer = (
  options: OtlpOptions,
  version: string
): Effect.Effect<SamplingTracer, never, Scope.Scope> =>
  Effect.gen(function*() {
    const recording = yield* OtlpTracer.make({
      url: options.tracesUrl,
      resource: resourceOf(options, version),
      headers: Redacted.value(options.headers),
      exportInterval: Duration.millis(options.scheduleDelayMillis),
      maxBatchSize: options.maxExportBatchSize,
      shutdownTimeout: Duration.millis(options.timeoutMillis)
    })
    return makeSamplingTracer(makeSampler(options.sampling), recording, yield* Effect.clock)
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
