/**
 * Where the rest of the service calls into observability: the `Observability` service, provided only when something is
 * configured (an OTLP endpoint, `METRICS_ADDRESS`); without it a caller does nothing. It loads none of the exporters.
 */
import { Context, Effect, Option, type Scope, type Tracer } from "effect"

/** What the server knows of a request when it starts. */
export interface RequestStart {
  readonly method: string
  /** The matched route (`/v1/pets/{petId}`, or the router's `/v1/pets/:petId`); `undefined`: none matched. */
  readonly route: string | undefined
  /** The path, without the query string. */
  readonly path: string
  readonly headers: { readonly get: (name: string) => string | null }
}

export interface RequestObservation {
  /**
   * The request's server span, to run the request under (`Effect.withParentSpan`) so that its spans are children and
   * its log lines carry its ids: `undefined` without tracing, a span that records nothing when not sampled.
   */
  readonly parentSpan: Tracer.Span | undefined
  /** The answer went out: its status and the authenticated key's id. Once. */
  readonly end: (status: number, keyId: string | undefined) => void
}

/** A database statement as its span and its metric name it. */
export interface Statement {
  readonly system: "sqlite" | "postgresql"
  /** `SELECT`, `INSERT`, `UPDATE`, `DELETE`, on the table `collection`. */
  readonly operation: string
  readonly collection: string
  /** The text, with placeholders (never values), for the span (SQLite's; `@effect/sql` makes its own spans). */
  readonly text?: string | undefined
}

/** A connection pool's state, read when the metrics are read (the `pg` pool's own counters). */
export interface PoolState {
  readonly totalCount: number
  readonly idleCount: number
  readonly waitingCount: number
}

export interface ObservabilityHooks {
  /** Called once per request, before anything else of it runs. */
  readonly observeRequest: (request: RequestStart) => RequestObservation
  /** Times a statement `@effect/sql` runs (it makes the span). */
  readonly observeStatement: <A, E, R>(statement: Statement, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Runs a statement of a synchronous driver (`bun:sqlite`) as `Effect.try` does, timed, a span in a sampled trace. */
  readonly runStatement: <A, E>(
    statement: Statement,
    run: () => A,
    onError: (cause: unknown) => E
  ) => Effect.Effect<A, E>
  /** Reports a connection pool's state for the life of the scope. */
  readonly observePool: (pool: PoolState, max: number) => Effect.Effect<void, never, Scope.Scope>
}

export class Observability extends Context.Tag("Observability")<Observability, ObservabilityHooks>() {}

export type StatementHooks = Pick<ObservabilityHooks, "observeStatement" | "runStatement">

/** Without observability: the statement alone. */
export const unobserved: StatementHooks = {
  observeStatement: (_statement, effect) => effect,
  runStatement: (_statement, run, onError) => Effect.try({ try: run, catch: onError })
}

/** The statement hooks a repository takes when it is built: the service's, or `unobserved`. */
export const statementHooks: Effect.Effect<StatementHooks> = Effect.map(
  Effect.serviceOption(Observability),
  Option.getOrElse(() => unobserved)
)
