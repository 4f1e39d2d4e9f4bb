/**
 * The PostgreSQL backend's `pg` pool: the one `@effect/sql-pg` would make (same options, same first `SELECT 1` within
 * the connect timeout, the same bounded `end`), with the statement timeouts and BIGINTs read as numbers, made here so
 * that its state is reported to the metrics (`db_client_connection_*`) when they are on.
 */
import { SqlError } from "@effect/sql"
import { Duration, Effect, Option } from "effect"
import { Observability, type PoolState } from "../Observability/Hooks.js"

/**
 * The URL with the timeouts of every connection, unless the operator's URL sets them: `statement_timeout` (the server
 * cancels a statement that runs longer) and `query_timeout` (the client stops waiting for an answer that does not come,
 * a little later, for a server that has gone silent).
 */
const withStatementTimeouts = (url: string, timeout: Duration.Duration): string => {
  const at = url.indexOf("?")
  const params = new URLSearchParams(at === -1 ? "" : url.slice(at + 1))
  const millis = Math.max(1, Math.round(Duration.toMillis(timeout)))
  if (!params.has("statement_timeout")) params.set("statement_timeout", String(millis))
  if (!params.has("query_timeout")) params.set("query_timeout", String(millis + 1000))
  return `${at === -1 ? url : url.slice(0, at)}?${params}`
}

/** What of `pg`'s `Pool` is used here (`pg` ships no type declarations). */
interface PgPool extends PoolState {
  readonly options: { readonly max?: number }
  query(text: string): Promise<unknown>
  end(): Promise<void>
  on(event: "error", listener: (error: unknown) => void): void
}

/** `pg`'s type parsers: a parser for each type oid, in the text format. */
interface PgTypes {
  getTypeParser(oid: number, format?: string): (value: string) => unknown
}

const importPg = (): Promise<{ readonly default: { readonly Pool: new(options: object) => PgPool; types: PgTypes } }> =>
  // @ts-expect-error: `pg` ships no type declarations; `PgPool` says what is used of it
  import("pg")

export const pool = (url: string, queryTimeout: Duration.Duration, connectTimeout: Duration.Duration) =>
  Effect.gen(function*() {
    // Loaded only when PostgreSQL is used: a SQLite start does not pay for the driver.
    const { default: { Pool, types } } = yield* Effect.promise(importPg)
    const pool = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const pool = new Pool({
          connectionString: withStatementTimeouts(url, queryTimeout),
          connectionTimeoutMillis: Duration.toMillis(connectTimeout),
          application_name: "petstore",
          // BIGINTs (oid 20) as numbers: the ids and times stored in them stay below 2^53, so rows come as SQLite's do.
          types: {
            getTypeParser: (oid: number, format?: string) => oid === 20 ? Number : types.getTypeParser(oid, format)
          }
        })
        pool.on("error", () => {}) // an idle connection that breaks is replaced; the next statement reports it
        return pool
      }),
      (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000))
    )
    yield* Effect.tryPromise({
      try: () => pool.query("SELECT 1"),
      catch: (cause) => new SqlError.SqlError({ cause, message: "PgClient: Failed to connect" })
    }).pipe(
      Effect.timeoutFail({
        duration: connectTimeout,
        onTimeout: () =>
          new SqlError.SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
      })
    )
    const observability = yield* Effect.serviceOption(Observability)
    if (Option.isSome(observability)) yield* observability.value.observePool(pool, pool.options.max ?? 10)
    return pool as never
  })
