/**
 * Observability as configured: nothing at all when nothing is configured (no module of it loaded beyond this one and
 * its configuration); else the hooks (`Hooks.ts`) and, as configured, the OTLP tracer and metrics export, and the
 * `/metrics` listener.
 *
 * Provide it below the server: its finalizers then run after the server's drain, so the spans of the requests the
 * drain completed are flushed, and `/metrics` answers (with `petstore_draining 1`) until the drain is over.
 */
import { Config, type ConfigError, Effect, Layer, Option } from "effect"
import { metricsEnabled, ObservabilityConfig, tracesEnabled } from "./Config.js"
import { Observability } from "./Hooks.js"

export const ObservabilityLive = (version: string): Layer.Layer<never, ConfigError.ConfigError | Error> =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const options = yield* ObservabilityConfig
    if (Option.isSome(yield* Config.option(Config.string("TRACING")))) {
      yield* Effect.logWarning(
        "TRACING is no longer read: traces go to the OTLP endpoint of OTEL_EXPORTER_OTLP_ENDPOINT"
      )
    }
    const tracing = tracesEnabled(options)
    const metrics = metricsEnabled(options)
    if (!tracing && !metrics) return Layer.empty

    const [{ makeHooks }, Metrics, { TraceIdsInLogsLive }] = yield* Effect.promise(() =>
      Promise.all([import("./Observe.js"), import("./Metrics.js"), import("./Tracer.js")])
    )
    const otlp = Option.getOrUndefined(options.otlp)
    const Otlp = otlp === undefined ? undefined : yield* Effect.promise(() => import("./Otlp.js"))
    // The exporter lives in this layer's scope: its last flush is this layer's finalizer.
    const tracer = tracing && Otlp !== undefined ? yield* Otlp.makeOtlpTracer(otlp!, version) : undefined
    if (metrics) {
      yield* Effect.acquireRelease(Effect.sync(() => Metrics.startProcessMetrics(version)), (stop) => Effect.sync(stop))
    }

    const layers: Array<Layer.Layer<never, Error> | Layer.Layer<Observability>> = [
      Layer.succeed(Observability, makeHooks({ tracer, metrics }))
    ]
    if (tracer !== undefined) layers.push(Layer.setTracer(tracer), Layer.setTracerEnabled(true), TraceIdsInLogsLive)
    if (Option.isSome(options.metricsAddress)) {
      const { MetricsServerLive } = yield* Effect.promise(() => import("./MetricsServer.js"))
      layers.push(MetricsServerLive(options.metricsAddress.value))
    }
    if (Otlp !== undefined && otlp!.metricsUrl !== "") layers.push(Otlp.OtlpMetricsLive(otlp!, version))
    return Layer.mergeAll(...(layers as [Layer.Layer<Observability>, ...Array<Layer.Layer<never, Error>>]))
  }))
