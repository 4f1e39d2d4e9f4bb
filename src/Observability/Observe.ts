/**
 * The `Observability` service as configured: each request's server span and metrics, each statement's span and
 * duration, the pool's state; and beside it the tracer, `/metrics` and the OTLP export. Span and attribute names are
 * the OpenTelemetry semantic conventions' (HTTP server, database client).
 */
import { Clock, Context, Effect, Exit, Layer, Option, Tracer } from "effect"
import type { ObservabilityOptions } from "./Config.js"
import { Observability, type ObservabilityHooks, type RequestObservation, unobserved } from "./Hooks.js"
import * as Metrics from "./Metrics.js"
import { MetricsServerLive } from "./MetricsServer.js"
import { NOT_SAMPLED, remoteParent, type SamplingTracer, TraceIdsInLogsLive } from "./Tracer.js"

const clock = Clock.make()

/** The methods the semantic conventions name; any other is `_OTHER` (a client does not get to choose label values). */
const KNOWN_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"])

/** `/v1/pets/:petId` (the router's spelling) → `/v1/pets/{petId}` (OpenAPI's and the semantic conventions'). */
const templateOf = Metrics.memo((route: string) => route.replace(/:(\w+)/g, "{$1}"))

/** A request observed: its server span and its duration's series, recorded once when it ends. */
class Observation implements RequestObservation {
  constructor(
    readonly parentSpan: Tracer.Span | undefined,
    private readonly record: Metrics.RequestRecorder | undefined,
    private readonly started: number,
    private ended = false
  ) {}

  end(status: number, keyId: string | undefined): void {
    if (this.ended) return
    this.ended = true
    if (this.record !== undefined) {
      Metrics.addInFlight(-1)
      this.record(status, this.started)
    }
    const span = this.parentSpan
    if (span === undefined || !span.sampled) return
    span.attribute("http.response.status_code", status)
    if (keyId !== undefined) span.attribute("petstore.api_key.id", keyId)
    // A 5xx is the server's failure (status Error, its code the `error.type`); a 4xx is the client's: a success.
    if (status < 500) return span.end(clock.unsafeCurrentTimeNanos(), Exit.void)
    span.attribute("error.type", String(status))
    span.end(clock.unsafeCurrentTimeNanos(), Exit.fail(String(status)))
  }
}

/** What an unsampled request without metrics is, shared: nothing to record at its end. */
const UNSAMPLED: RequestObservation = new Observation(NOT_SAMPLED, undefined, 0, true)

/** The hooks with a tracer, or metrics, or both (without either there is no service). */
const makeHooks = (tracer: SamplingTracer | undefined, metrics: boolean): ObservabilityHooks => {
  const observeRequest: ObservabilityHooks["observeRequest"] = (request) => {
    const parent = tracer === undefined ? Option.none() : remoteParent(request.headers)
    const traceId = tracer?.sample(parent)
    if (traceId === undefined && !metrics) return UNSAMPLED
    const started = performance.now()
    const method = KNOWN_METHODS.has(request.method) ? request.method : "_OTHER"
    const route = request.route === undefined ? undefined : templateOf(request.route)
    let span = tracer === undefined ? undefined : NOT_SAMPLED
    if (tracer !== undefined && traceId !== undefined) {
      // Named `{method} {route}`, the method alone without a route, `HTTP` for a method the conventions do not name.
      const prefix = method === "_OTHER" ? "HTTP" : method
      span = tracer.start(route === undefined ? prefix : `${prefix} ${route}`, traceId, parent, "server")
      span.attribute("http.request.method", method)
      if (method === "_OTHER") span.attribute("http.request.method_original", request.method)
      if (route !== undefined) span.attribute("http.route", route)
      span.attribute("url.path", request.path)
    }
    if (metrics) Metrics.addInFlight(1)
    return new Observation(span, metrics ? Metrics.requestRecorder(method)(route ?? "") : undefined, started)
  }

  /** The statement timed, in the one step `Effect.try` takes. */
  const timed: ObservabilityHooks["runStatement"] = (statement, run, onError) =>
    unobserved.runStatement(statement, () => {
      const started = performance.now()
      try {
        return run()
      } finally {
        Metrics.recordStatement(statement, started)
      }
    }, onError)
  /** Without tracing, or outside a sampled trace. */
  const untraced = metrics ? timed : unobserved.runStatement

  /** Inside a sampled trace, the statement is also a span `{operation} {table}`, a child of the fiber's span. */
  const traced = (tracer: SamplingTracer): ObservabilityHooks["runStatement"] => (statement, run, onError) =>
    Effect.contextWithEffect((context: Context.Context<never>) => {
      const parent = Context.getOrElse(context, Tracer.ParentSpan, () => undefined)
      if (parent === undefined || !parent.sampled) return untraced(statement, run, onError)
      const name = `${statement.operation} ${statement.collection}`
      const span = tracer.start(name, parent.traceId, Option.some(parent), "client")
      span.attribute("db.system.name", statement.system)
      span.attribute("db.operation.name", statement.operation)
      span.attribute("db.collection.name", statement.collection)
      if (statement.text !== undefined) span.attribute("db.query.text", statement.text)
      return Effect.onExit(
        untraced(statement, run, onError),
        (exit) => Effect.sync(() => span.end(clock.unsafeCurrentTimeNanos(), exit))
      )
    })

  return {
    observeRequest,
    runStatement: tracer === undefined ? untraced : traced(tracer),
    // `@effect/sql` makes the statement's span itself: here, its duration.
    observeStatement: (statement, effect) =>
      metrics
        ? Effect.suspend(() => {
          const started = performance.now()
          return Effect.ensuring(effect, Effect.sync(() => Metrics.recordStatement(statement, started)))
        })
        : effect,
    observePool: (pool, max) =>
      metrics
        ? Effect.acquireRelease(Effect.sync(() => Metrics.addPool(pool, max)), (stop) => Effect.sync(stop))
        : Effect.void
  }
}

/**
 * The service and, as configured, the tracer (its trace ids in the log lines), the process figures, `/metrics` and the
 * OTLP metrics export; the OTLP modules load only with an OTLP endpoint.
 */
export const layer = ({ metrics, metricsAddress, tracing, ...options }: ObservabilityOptions, version: string) =>
  Effect.gen(function*() {
    const otlp = Option.getOrUndefined(options.otlp)
    const Otlp = otlp && (yield* Effect.promise(() => import("./Otlp.js")))
    // The exporter lives in the scope of the layer made of this: its last flush is that layer's finalizer.
    const tracer = otlp && Otlp && tracing ? yield* Otlp.makeOtlpTracer(otlp, version) : undefined
    if (metrics) {
      yield* Effect.acquireRelease(Effect.sync(() => Metrics.startProcessMetrics(version)), (stop) => Effect.sync(stop))
    }
    return Layer.mergeAll(
      Layer.succeed(Observability, makeHooks(tracer, metrics)),
      tracer ? Layer.mergeAll(Layer.setTracer(tracer), Layer.setTracerEnabled(true), TraceIdsInLogsLive) : Layer.empty,
      Option.isSome(metricsAddress) ? MetricsServerLive(metricsAddress.value) : Layer.empty,
      otlp && Otlp && otlp.metricsUrl !== "" ? Otlp.OtlpMetricsLive(otlp, version) : Layer.empty
    )
  })
