/**
 * Observability as configured: nothing when nothing is configured (no more of it loaded than this module, its
 * configuration and `Hooks.ts`); else the service and the rest (`Observe.ts`).
 *
 * Provide it below the server: its finalizers then run after the server's drain, so the spans of the requests the
 * drain completed are flushed, and `/metrics` answers (with `petstore_draining 1`) until the drain is over.
 */
import { Config, type ConfigError, Effect, Layer, Option } from "effect"
import { ObservabilityConfig } from "./Config.js"

export const ObservabilityLive = (version: string): Layer.Layer<never, ConfigError.ConfigError | Error> =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const options = yield* ObservabilityConfig
    if (Option.isSome(yield* Config.option(Config.string("TRACING")))) {
      yield* Effect.logWarning(
        "TRACING is no longer read: traces go to the OTLP endpoint of OTEL_EXPORTER_OTLP_ENDPOINT"
      )
    }
    if (!options.tracing && !options.metrics) return Layer.empty
    const Observe = yield* Effect.promise(() => import("./Observe.js"))
    return yield* Observe.layer(options, version)
  }))
