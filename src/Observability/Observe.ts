/**
 * The hooks of `Hooks.ts` made real: the server span of a request and its metrics, and the statements' spans and
 * durations. The span and attribute names are the OpenTelemetry semantic conventions' (HTTP server, database client).
 */
import { Clock, Context, Effect, Exit, Option, Tracer } from "effect"
import { constUndefined } from "effect/Function"
import {
  type ObservabilityHooks,
  type RequestObservation,
  type RequestStart,
  type Statement,
  unobserved
} from "./Hooks.js"
import { addInFlight, addPool, methodLabel, recordStatement, type RequestRecorder, requestRecorder } from "./Metrics.js"
import { NOT_SAMPLED, remoteParent, type SamplingTracer } from "./Tracer.js"

export interface ObserveOptions {
  /** The tracer, when spans are exported. */
  readonly tracer: SamplingTracer | undefined
  /** Whether the metrics are counted. */
  readonly metrics: boolean
}

/** The key id's attribute: the id the key list shows, never the key. */
export const KEY_ID_ATTRIBUTE = "petstore.api_key.id"

const clock = Clock.make()

/** `/v1/pets/:petId` (the router's spelling) → `/v1/pets/{petId}` (OpenAPI's and the semantic conventions'). */
const templates = new Map<string, string>()
const templateOf = (route: string): string => {
  let template = templates.get(route)
  if (template === undefined) templates.set(route, template = route.replace(/:(\w+)/g, "{$1}"))
  return template
}

/** A request observed: its server span and its series, recorded once when it ends. */
class Observation implements RequestObservation {
  constructor(
    readonly parentSpan: Tracer.Span | undefined,
    private readonly record: RequestRecorder | undefined,
    private readonly started: number,
    private ended = false
  ) {}

  end(status: number, keyId: string | undefined, errorType?: string): void {
    if (this.ended) return
    this.ended = true
    if (this.record !== undefined) {
      addInFlight(-1)
      this.record(status, (performance.now() - this.started) / 1000)
    }
    const span = this.parentSpan
    if (span === undefined || !span.sampled) return
    span.attribute("http.response.status_code", status)
    if (keyId !== undefined) span.attribute(KEY_ID_ATTRIBUTE, keyId)
    // A 5xx is the server's failure (status Error); a 4xx is the client's: the span ends as a success.
    if (status < 500) return span.end(clock.unsafeCurrentTimeNanos(), Exit.void)
    span.attribute("error.type", errorType ?? String(status))
    span.end(clock.unsafeCurrentTimeNanos(), Exit.fail(errorType ?? String(status)))
  }
}

/** Nothing to record at its end: observations shared by every such request, ended from the start. */
const NOTHING: RequestObservation = new Observation(undefined, undefined, 0, true)
const UNSAMPLED: RequestObservation = new Observation(NOT_SAMPLED, undefined, 0, true)

/**
 * A request's server span: named `{method} {route}`, the method alone without a route, `HTTP` for a method the
 * conventions do not name; the path without the query string.
 */
const startServerSpan = (
  tracer: SamplingTracer,
  traceId: string,
  parent: Option.Option<Tracer.AnySpan>,
  method: string,
  route: string | undefined,
  request: RequestStart
): Tracer.Span => {
  const prefix = method === "_OTHER" ? "HTTP" : method
  const span = tracer.start(route === undefined ? prefix : `${prefix} ${route}`, traceId, parent, "server")
  span.attribute("http.request.method", method)
  if (method === "_OTHER") span.attribute("http.request.method_original", request.method)
  if (route !== undefined) span.attribute("http.route", route)
  span.attribute("url.path", request.path)
  return span
}

export const makeHooks = ({ metrics, tracer }: ObserveOptions): ObservabilityHooks => {
  const observeRequest: ObservabilityHooks["observeRequest"] = (request) => {
    if (!metrics && tracer === undefined) return NOTHING
    const parent = tracer === undefined ? Option.none() : remoteParent(request.headers)
    const traceId = tracer?.sample(parent)
    if (tracer !== undefined && traceId === undefined && !metrics) return UNSAMPLED
    const started = performance.now()
    const method = methodLabel(request.method)
    const route = request.route === undefined ? undefined : templateOf(request.route)
    const span = tracer === undefined
      ? undefined
      : traceId === undefined
      ? NOT_SAMPLED
      : startServerSpan(tracer, traceId, parent, method, route, request)
    const record = metrics ? requestRecorder(method, route ?? "") : undefined
    if (record !== undefined) addInFlight(1)
    return new Observation(span, record, started)
  }

  /** A statement's span, `{operation} {table}`, a child of the fiber's span when that one is sampled. */
  const statementSpan = (context: Context.Context<never>, statement: Statement): Tracer.Span | undefined => {
    const parent = Context.getOrElse(context, Tracer.ParentSpan, constUndefined)
    if (tracer === undefined || parent === undefined || !parent.sampled) return undefined
    const span = tracer.start(
      `${statement.operation} ${statement.collection}`,
      parent.traceId,
      Option.some(parent),
      "client"
    )
    span.attribute("db.system.name", statement.system)
    span.attribute("db.operation.name", statement.operation)
    span.attribute("db.collection.name", statement.collection)
    if (statement.text !== undefined) span.attribute("db.query.text", statement.text)
    return span
  }

  const runStatement: ObservabilityHooks["runStatement"] = (statement, run, onError) =>
    Effect.contextWithEffect((context: Context.Context<never>) => {
      const span = statementSpan(context, statement)
      // Outside a sampled request and without metrics, the statement alone (nothing to time it for).
      if (span === undefined && !metrics) return unobserved.runStatement(statement, run, onError)
      const started = performance.now()
      let exit: Exit.Exit<ReturnType<typeof run>, ReturnType<typeof onError>>
      try {
        exit = Exit.succeed(run())
      } catch (cause) {
        exit = Exit.fail(onError(cause))
      }
      if (metrics) recordStatement(statement, (performance.now() - started) / 1000)
      span?.end(clock.unsafeCurrentTimeNanos(), exit)
      return exit
    })

  // `@effect/sql` makes the statement's span itself (`sql.execute`): here, its duration.
  const observeStatement: ObservabilityHooks["observeStatement"] = (statement, effect) =>
    metrics
      ? Effect.suspend(() => {
        const started = performance.now()
        return Effect.ensuring(
          effect,
          Effect.sync(() => recordStatement(statement, (performance.now() - started) / 1000))
        )
      })
      : effect

  const observePool: ObservabilityHooks["observePool"] = (pool, max) =>
    metrics ? Effect.acquireRelease(Effect.sync(() => addPool(pool, max)), (stop) => Effect.sync(stop)) : Effect.void

  /** Without tracing: the statement timed, in the one step `Effect.try` takes. */
  const timedStatement: ObservabilityHooks["runStatement"] = (statement, run, onError) =>
    Effect.try({
      try: () => {
        const started = performance.now()
        try {
          return run()
        } finally {
          recordStatement(statement, (performance.now() - started) / 1000)
        }
      },
      catch: onError
    })

  return {
    observeRequest,
    observeStatement,
    runStatement: tracer !== undefined ? runStatement : metrics ? timedStatement : unobserved.runStatement,
    observePool
  }
}
