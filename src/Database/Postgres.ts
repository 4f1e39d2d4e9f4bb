/**
 * The PostgreSQL backend: `@effect/sql-pg`'s client on a `pg` pool made here as `@effect/sql-pg` would make it, with
 * statement timeouts and BIGINTs read as numbers, so that its state can be reported (`db_client_connection_*`).
 * Connections that fail are replaced: the service recovers by itself once the database is back, and until then a
 * statement fails within the timeouts (a 503). At start-up an unreachable database is retried, once a second, for the
 * start-up timeout; then the layer fails naming the server, never the password.
 */
import { type Migrator, type SqlClient, SqlError } from "@effect/sql"
import { Duration, Effect, Layer, Option, Redacted, Schedule, Schema } from "effect"
import { Observability, type PoolState } from "../Observability/Hooks.js"
import { MigrationsLive } from "./Migrations.js"
import type { PostgresTimeouts } from "./Sql.js"

/** The start-up gave up: PostgreSQL did not answer in time. The message names the server, never the password. */
export class DatabaseUnavailable extends Schema.TaggedError<DatabaseUnavailable>()("DatabaseUnavailable", {
  message: Schema.String
}) {}

const decoded = (text: string): string => {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/** The server a PostgreSQL URL names, for messages: `host:port/database`, never the user's password. */
export const serverOf = (url: string): string => {
  if (!URL.canParse(url)) return "the server of DATABASE_URL"
  const parsed = new URL(url)
  const host = parsed.hostname || parsed.searchParams.get("host") || "localhost"
  return `${host}:${parsed.port || "5432"}/${decoded(parsed.pathname.slice(1))}`
}

/** What of `pg` is used here (it ships no type declarations). */
interface Pg {
  readonly Pool: new(options: object) => PoolState & {
    readonly options: { readonly max?: number }
    query(text: string): Promise<unknown>
    end(): Promise<void>
    on(event: "error", listener: (error: unknown) => void): void
  }
  readonly types: { getTypeParser(oid: number, format?: string): (value: string) => unknown }
}

const pool = (url: string, timeouts: PostgresTimeouts) =>
  Effect.gen(function*() {
    // Loaded only when PostgreSQL is used: a SQLite start does not pay for the driver.
    // @ts-expect-error: `pg` ships no type declarations; `Pg` says what is used of it
    const { default: { Pool, types } }: { default: Pg } = yield* Effect.promise(() => import("pg"))
    const pool = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const queryMillis = Math.max(1, Math.round(Duration.toMillis(timeouts.query)))
        const pool = new Pool({
          connectionString: url,
          connectionTimeoutMillis: Duration.toMillis(timeouts.connect),
          application_name: "petstore",
          // Unless the URL sets them: the server cancels a statement that runs longer, and the client stops waiting,
          // a little later, for a server that has gone silent.
          statement_timeout: queryMillis,
          query_timeout: queryMillis + 1000,
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
    }).pipe(Effect.timeoutFail({
      duration: timeouts.connect,
      onTimeout: () =>
        new SqlError.SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
    }))
    const observability = yield* Effect.serviceOption(Observability)
    if (Option.isSome(observability)) yield* observability.value.observePool(pool, pool.options.max ?? 10)
    return pool as never
  })

/** Why a connection failed, in words that name no secret. */
const reasonOf = (error: SqlError.SqlError, password: string): string => {
  const cause = error.cause as { message?: unknown; code?: unknown; errors?: ReadonlyArray<{ message?: unknown }> }
  const detail = [cause?.message, cause?.errors?.[0]?.message, cause?.code].find((text) =>
    typeof text === "string" && text.length > 0
  )
  const reason = typeof detail === "string" ? `${error.message}: ${detail}` : error.message
  return password.length > 0 ? reason.replaceAll(password, "***") : reason
}

/** The migrated client. A failed migration is not retried: only a database that does not answer (yet). */
export const layer = (
  url: Redacted.Redacted<string>,
  timeouts: PostgresTimeouts
): Layer.Layer<SqlClient.SqlClient, DatabaseUnavailable | Migrator.MigrationError> => {
  const value = Redacted.value(url)
  const server = serverOf(value)
  const password = URL.canParse(value) ? decoded(new URL(value).password) : ""
  // The warning is logged only when another attempt follows, so that nothing comes after the final message.
  const retry = Schedule.spaced("1 second").pipe(
    Schedule.whileInput((error: SqlError.SqlError | Migrator.MigrationError) => error._tag === "SqlError"),
    Schedule.upTo(timeouts.startup),
    Schedule.passthrough,
    Schedule.onDecision((error, decision) =>
      decision._tag === "Continue" && error._tag === "SqlError"
        ? Effect.logWarning(`PostgreSQL at ${server} does not answer yet; retrying`).pipe(
          Effect.annotateLogs("reason", reasonOf(error, password))
        )
        : Effect.void
    )
  )
  const client = Layer.unwrapEffect(
    Effect.map(
      Effect.promise(() => import("@effect/sql-pg")),
      ({ PgClient }) => PgClient.layerFromPool({ acquire: pool(value, timeouts) })
    )
  )
  return MigrationsLive.pipe(
    Layer.provideMerge(client),
    Layer.retry(retry),
    Layer.catchAll((error) =>
      Layer.fail(
        error._tag === "SqlError"
          ? new DatabaseUnavailable({
            message: `PostgreSQL at ${server} did not answer within ${Duration.format(timeouts.startup)}: ${
              reasonOf(error, password)
            }`
          })
          : error
      )
    )
  )
}
