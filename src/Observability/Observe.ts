/**
 * The hooks of `Hooks.ts` made real: the server span of a request and its metrics, and the statements' spans and
 * durations. The span and attribute names are the OpenTelemetry semantic conventions' (HTTP server, database client).
 */
import { Clock, Context, Effect, Exit, Option, Tracer } from "effect"
import { constUndefined } from "effect/Function"
import { type ObservabilityHooks, type RequestObservation, type Statement, unobserved } from "./Hooks.js"
import { addInFlight, addPool, methodLabel, recordStatement, type RequestRecorder, requestRecorder } from "./Metrics.js"
import { remoteParent } from "./Sampler.js"
import { NOT_SAMPLED, type SamplingTracer, type SharedAttributes } from "./Tracer.js"

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
  if (template === undefined) {
    template = route.replace(/:(\w+)/g, "{$1}")
    templates.set(route, template)
  }
  return template
}

/** What every span of one kind has in common: its name and the attributes it shares (`Tracer.SharedAttributes`). */
interface SpanKindOf {
  readonly name: string
  readonly shared: SharedAttributes
}

/**
 * The server spans of a method and route: named, per the semantic conventions, `{method} {route}`, or the method alone
 * without a route (`HTTP` for a method they do not name); `http.request.method` and `http.route` shared. Made once per
 * pair, so a sampled request joins no name and records two attributes fewer.
 */
const serverSpans = new Map<string, Map<string | undefined, SpanKindOf>>()
const serverSpanOf = (method: string, route: string | undefined): SpanKindOf => {
  let byRoute = serverSpans.get(method)
  if (byRoute === undefined) serverSpans.set(method, byRoute = new Map())
  let kind = byRoute.get(route)
  if (kind === undefined) {
    const prefix = method === "_OTHER" ? "HTTP" : method
    const shared: Array<[string, unknown]> = [["http.request.method", method]]
    if (route !== undefined) shared.push(["http.route", route])
    kind = { name: route === undefined ? prefix : `${prefix} ${route}`, shared }
    byRoute.set(route, kind)
  }
  return kind
}

/** A statement's spans: named `{operation} {table}`, its description's attributes shared. Made once per statement. */
const statementSpans = new WeakMap<Statement, SpanKindOf>()
const statementSpanOf = (statement: Statement): SpanKindOf => {
  let kind = statementSpans.get(statement)
  if (kind === undefined) {
    const shared: Array<[string, unknown]> = [
      ["db.system.name", statement.system],
      ["db.operation.name", statement.operation],
      ["db.collection.name", statement.collection]
    ]
    if (statement.text !== undefined) shared.push(["db.query.text", statement.text])
    kind = { name: `${statement.operation} ${statement.collection}`, shared }
    statementSpans.set(statement, kind)
  }
  return kind
}

/**
 * A request observed: its server span (tracing) and its series (metrics), recorded when it ends, once. One object per
 * request (a closure for `end` and the object holding it were two).
 */
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
    if (span !== undefined && span.sampled) {
      span.attribute("http.response.status_code", status)
      if (keyId !== undefined) span.attribute(KEY_ID_ATTRIBUTE, keyId)
      if (status >= 500) span.attribute("error.type", errorType ?? String(status))
      span.end(clock.unsafeCurrentTimeNanos(), Exit.void)
    }
  }
}

/** Nothing to record at its end: observations shared by every such request, ended from the start. */
const NOTHING: RequestObservation = new Observation(undefined, undefined, 0, true)
/** An unsampled request without metrics. */
const UNSAMPLED: RequestObservation = new Observation(NOT_SAMPLED, undefined, 0, true)

export const makeHooks = ({ metrics, tracer }: ObserveOptions): ObservabilityHooks => {
  const observeRequest: ObservabilityHooks["observeRequest"] = (request) => {
    if (!metrics && tracer === undefined) return NOTHING
    let parent: Option.Option<Tracer.AnySpan> = Option.none()
    let traceId: string | undefined
    if (tracer !== undefined) {
      parent = remoteParent(request.headers)
      traceId = tracer.sample(parent)
      if (traceId === undefined && !metrics) return UNSAMPLED
    }
    const started = performance.now()
    const method = methodLabel(request.method)
    const route = request.route === undefined ? undefined : templateOf(request.route)
    let span: Tracer.Span | undefined
    if (tracer !== undefined) {
      if (traceId === undefined) span = NOT_SAMPLED
      else {
        const kind = serverSpanOf(method, route)
        span = tracer.startSampled(kind.name, traceId, parent, "server", kind.shared)
        if (method === "_OTHER") span.attribute("http.request.method_original", request.method)
        span.attribute("url.path", request.path)
      }
    }
    const record = metrics ? requestRecorder(method, route ?? "") : undefined
    if (record !== undefined) addInFlight(1)
    return new Observation(span, record, started)
  }

  const timed = <A, E, R>(statement: Statement, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      const started = performance.now()
      return Effect.onExit(effect, () => {
        recordStatement(statement, (performance.now() - started) / 1000)
        return Effect.void
      })
    })

  /** A statement's span, `{operation} {table}`, a child of the fiber's span when that one is sampled. */
  const statementSpan = (context: Context.Context<never>, statement: Statement): Tracer.Span | undefined => {
    if (tracer === undefined) return undefined
    const parent = Context.getOrElse(context, Tracer.ParentSpan, constUndefined)
    if (parent === undefined || !parent.sampled) return undefined
    const kind = statementSpanOf(statement)
    return tracer.startSampled(kind.name, parent.traceId, Option.some(parent), "client", kind.shared)
  }

  /** Without tracing: the statement timed, in the one step `Effect.try` would take. */
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

  const tracedStatement: ObservabilityHooks["runStatement"] = (statement, run, onError) =>
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

  const runStatement: ObservabilityHooks["runStatement"] = tracer !== undefined
    ? tracedStatement
    : metrics
    ? timedStatement
    : unobserved.runStatement

  // `@effect/sql` makes the statement's span itself (`sql.execute`): here, its duration.
  const observeStatement: ObservabilityHooks["observeStatement"] = metrics ? timed : unobserved.observeStatement

  const observePool: ObservabilityHooks["observePool"] = (pool, max) =>
    metrics ? Effect.acquireRelease(Effect.sync(() => addPool(pool, max)), (stop) => Effect.sync(stop)) : Effect.void

  return { observeRequest, observeStatement, runStatement, observePool }
}
