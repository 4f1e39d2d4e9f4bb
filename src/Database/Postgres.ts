/**
 * The PostgreSQL backend: `@effect/sql-pg`'s client on a `pg` pool made here as `@effect/sql-pg` would make it, with
 * statement timeouts and BIGINTs read as numbers, so that its state can be reported (`db_client_connection_*`).
 * Connections that fail are replaced: the service recovers by itself once the database is back, and until then a
 * statement fails within the timeouts (a 503). At start-up what time can cure (no answer, a server starting up or out
 * of connections) is retried, once a second, for the start-up timeout; what it cannot (a wrong password, a database
 * that does not exist) fails at once. Either way the layer fails naming the server, never the password.
 */
import { type Migrator, type SqlClient, SqlError } from "@effect/sql"
import { Duration, Effect, Layer, Option, Redacted, Schedule, Schema, Stream } from "effect"
import { Observability, type PoolState } from "../Observability/Hooks.js"
import { MigrationsLive } from "./Migrations.js"
import { Notifications } from "./Notifications.js"
import type { PostgresTimeouts } from "./Sql.js"

/** The start-up gave up: PostgreSQL was not ready in time. The message names the server, never the password. */
export class DatabaseUnavailable extends Schema.TaggedError<DatabaseUnavailable>()("DatabaseUnavailable", {
  message: Schema.String
}) {}

/**
 * PostgreSQL answered with a refusal that waiting does not cure (a wrong password, a database that does not exist): the
 * message names the server, the cause and the setting to fix, never the password.
 */
export class DatabaseRefused extends Schema.TaggedError<DatabaseRefused>()("DatabaseRefused", {
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

/**
 * The SQLSTATE of the server's answer (`28P01`, `3D000`, `57P03`…), when the server answered; none when it did not
 * (refused, timed out, reset: the driver's codes such as `ECONNREFUSED` are not SQLSTATEs).
 */
export const sqlStateOf = (error: SqlError.SqlError): string | undefined => {
  const cause = error.cause as { code?: unknown; severity?: unknown } | undefined
  return typeof cause?.severity === "string" && typeof cause.code === "string" ? cause.code : undefined
}

/**
 * Whether waiting may cure the failure: no answer at all, or an answer that says "later": a connection exception
 * (class 08), a transaction rolled back by a conflict (class 40), insufficient resources such as too many connections
 * (class 53), a lock not available (55P03), a statement cancelled by its timeout (57014: the migrations wait for
 * another replica's), a server shutting down, restarting or starting up (57P01, 57P02, 57P03). Any other answer (a
 * wrong password 28P01, an unknown user or a pg_hba.conf refusal 28000, a missing database 3D000, a missing privilege
 * 42501…) stays what it is.
 */
export const healsWithTime = (sqlState: string | undefined): boolean =>
  sqlState === undefined || /^(?:08|40|53|55P03|57014|57P0[123])/.test(sqlState)

/** The server's own words for a refusal, without the password. */
const serverSays = (error: SqlError.SqlError, password: string): string => {
  const message = (error.cause as { message?: unknown } | undefined)?.message
  const text = typeof message === "string" && message.length > 0 ? message : error.message
  return password.length > 0 ? text.replaceAll(password, "***") : text
}

/** A refusal that waiting does not cure, in one line: what PostgreSQL said, and what in DATABASE_URL to fix. */
const refusal = (url: string, error: SqlError.SqlError, sqlState: string, password: string): string => {
  const parsed = URL.canParse(url) ? new URL(url) : undefined
  const user = parsed === undefined ? "" : decoded(parsed.username)
  const server = serverOf(url)
  const says = `${serverSays(error, password)} (SQLSTATE ${sqlState})`
  switch (sqlState) {
    case "28P01":
      return `PostgreSQL at ${server} refused the password: ${says}. Fix the password (or the user, "${user}") ` +
        `in DATABASE_URL (or --database).`
    case "3D000": {
      const database = server.slice(server.indexOf("/") + 1)
      return `PostgreSQL at ${server} has no such database: ${says}. Fix the database name in DATABASE_URL (or ` +
        `--database), or create it (createdb ${database}).`
    }
    case "28000":
      return `PostgreSQL at ${server} refused user "${user}": ${says}. Fix the user in DATABASE_URL (or --database), ` +
        `or let it in on the server (CREATE ROLE, pg_hba.conf).`
    case "42501":
      return `PostgreSQL at ${server} refused user "${user}" a privilege petstore needs: ${says}. Grant it, or set ` +
        `DATABASE_URL to a user that has it.`
    default:
      return `PostgreSQL at ${server} refused: ${says}. Check DATABASE_URL and the server.`
  }
}

/**
 * The migrated client. A failed migration is not retried, nor a refusal that waiting does not cure: only a database
 * that does not answer (yet), or answers that it cannot take the connection now (`healsWithTime`).
 */
export const layer = (
  url: Redacted.Redacted<string>,
  timeouts: PostgresTimeouts
): Layer.Layer<SqlClient.SqlClient, DatabaseUnavailable | DatabaseRefused | Migrator.MigrationError> => {
  const value = Redacted.value(url)
  const server = serverOf(value)
  const password = URL.canParse(value) ? decoded(new URL(value).password) : ""
  // The warning is logged only when another attempt follows, so that nothing comes after the final message.
  const retry = Schedule.spaced("1 second").pipe(
    Schedule.whileInput((error: SqlError.SqlError | Migrator.MigrationError) =>
      error._tag === "SqlError" && healsWithTime(sqlStateOf(error))
    ),
    Schedule.upTo(timeouts.startup),
    Schedule.passthrough,
    Schedule.onDecision((error, decision) =>
      decision._tag === "Continue" && error._tag === "SqlError"
        ? Effect.logWarning(`PostgreSQL at ${server} is not ready yet; retrying`).pipe(
          Effect.annotateLogs("reason", reasonOf(error, password))
        )
        : Effect.void
    )
  )
  /** The error the start-up ends with: a refusal at once, or what the last attempt met when the time is up. */
  const startupFailure = (error: SqlError.SqlError): DatabaseRefused | DatabaseUnavailable => {
    const sqlState = sqlStateOf(error)
    if (sqlState !== undefined && !healsWithTime(sqlState)) {
      return new DatabaseRefused({ message: refusal(value, error, sqlState, password) })
    }
    const within = `${Duration.format(timeouts.startup)} (DB_STARTUP_TIMEOUT)`
    // No SQLSTATE: no answer at all; with one, the server answered, each time, that it could not take the connection.
    const reason = reasonOf(error, password)
    const message = sqlState === undefined
      ? `PostgreSQL at ${server} could not be reached within ${within}: ${reason}. Check that the server is running ` +
        `and takes connections at ${server.split("/")[0]}, the host and port of DATABASE_URL (or --database).`
      : `PostgreSQL at ${server} still refused connections after ${within}: ${reason}`
    return new DatabaseUnavailable({ message })
  }
  const client = Layer.unwrapEffect(
    Effect.map(
      Effect.promise(() => import("@effect/sql-pg")),
      ({ PgClient }) =>
        Layer.effect(
          Notifications,
          Effect.map(PgClient.PgClient, (pg) => ({
            listen: (channel: string) => Stream.map(pg.listen(channel), () => undefined)
          }))
        ).pipe(Layer.provideMerge(PgClient.layerFromPool({ acquire: pool(value, timeouts) })))
    )
  )
  return MigrationsLive.pipe(
    Layer.provideMerge(client),
    Layer.retry(retry),
    Layer.catchAll((error) => Layer.fail(error._tag === "SqlError" ? startupFailure(error) : error))
  )
}
