/**
 * Where the rest of the service calls into observability: one service, present only when something is configured
 * (`OTEL_*` endpoint, `METRICS_ADDRESS`); absent, a caller does nothing at all. It loads nothing of the exporters.
 */
import { Context, Effect, type Scope, type Tracer } from "effect"

/** What the serving pipeline knows of a request when it starts. */
export interface RequestStart {
  readonly method: string
  /** The matched route's template (`/v1/pets/{petId}`, or the router's `/v1/pets/:petId`); `undefined`: no route. */
  readonly route: string | undefined
  /** The path alone, without the query string. */
  readonly path: string
  /** The request's headers (for `traceparent`). */
  readonly headers: { readonly get: (name: string) => string | null }
}

/** One request being observed: started by `observeRequest`, ended once by `end`. */
export interface RequestObservation {
  /**
   * The request's server span: the pipeline runs the request's fiber under it (`Effect.withParentSpan`), so that the
   * spans made while serving it are its children and its log lines carry its ids. `undefined` when tracing is off; a
   * span that records nothing (`sampled: false`) when the request is not sampled, so its children are not either.
   */
  readonly parentSpan: Tracer.Span | undefined
  /**
   * The answer went out: its status, the id of the API key that authenticated (never the key), and for a 5xx what
   * failed (`error.type`, e.g. the error's tag; the status otherwise). Ends the span, counts the request.
   */
  readonly end: (status: number, keyId: string | undefined, errorType?: string) => void
}

/** A database statement, as the metric's labels and the span's name and attributes say it. */
export interface Statement {
  readonly system: "sqlite" | "postgresql"
  /** `SELECT`, `INSERT`, `UPDATE`, `DELETE`, on the table `collection`. */
  readonly operation: string
  readonly collection: string
  /** The statement's text, with placeholders (never values), for the span (SQLite; `@effect/sql` adds its own). */
  readonly text?: string | undefined
}

/** A connection pool's state, read when the metrics are read (the `pg` pool's own counters). */
export interface PoolState {
  readonly totalCount: number
  readonly idleCount: number
  readonly waitingCount: number
}

export interface ObservabilityHooks {
  /** Starts observing a request: the pipeline calls it once per request, before anything else of the request runs. */
  readonly observeRequest: (request: RequestStart) => RequestObservation
  /**
   * Times a statement run by `@effect/sql` (`db_client_operation_duration_seconds`); `@effect/sql` makes its span.
   */
  readonly observeStatement: <A, E, R>(statement: Statement, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /**
   * Runs a statement on a synchronous driver (`bun:sqlite`'s prepared statements), as `Effect.try` does, timing it
   * and, inside a sampled request, making its child span, in one step.
   */
  readonly runStatement: <A, E>(
    statement: Statement,
    run: () => A,
    onError: (cause: unknown) => E
  ) => Effect.Effect<A, E>
  /** Reports a connection pool's state (`db_client_connection_*`) for the life of the scope. */
  readonly observePool: (pool: PoolState, max: number) => Effect.Effect<void, never, Scope.Scope>
}

export class Observability extends Context.Tag("Observability")<Observability, ObservabilityHooks>() {}

export type StatementHooks = Pick<ObservabilityHooks, "observeStatement" | "runStatement">

/** Without observability: the statement alone. */
export const unobserved: StatementHooks = {
  observeStatement: (_statement, effect) => effect,
  runStatement: (_statement, run, onError) => Effect.try({ try: run, catch: onError })
}

/**
 * The statement hooks for a repository: the service's, or the statement alone when observability is off. The
 * repositories take them once when they are built and run each statement through them.
 */
export const statementHooks: Effect.Effect<StatementHooks> = Effect.map(
  Effect.serviceOption(Observability),
  (hooks) => hooks._tag === "Some" ? hooks.value : unobserved
)
