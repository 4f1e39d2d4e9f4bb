/**
 * The database: the one place that knows which backend stores the catalogue. `DATABASE_URL` picks it once: a
 * `postgres://` or `postgresql://` URL selects PostgreSQL (several replicas may share one database), anything else is a
 * SQLite file path (or `:memory:`). Either way this layer provides a `SqlClient` on which the bundled migrations have
 * run; the repositories, the handlers and the command line do not know which backend they run on.
 */
import { Migrator, SqlClient, SqlError } from "@effect/sql"
import type { PgClient } from "@effect/sql-pg"
import { Config, type ConfigError, Duration, Effect, Either, Layer, Redacted, Schedule, Schema } from "effect"
import { duration, positiveDuration } from "../Config.js"
import { migrations } from "./migrations/index.js"
import * as Postgres from "./Postgres.js"
import * as Sqlite from "./Sqlite.js"
import { type DatabaseFileError, explainingOpenFailures, sqliteFile } from "./SqliteFile.js"
import * as SqliteWriter from "./SqliteWriter.js"

/** Where the catalogue is stored. It may carry a password: it stays `Redacted` wherever it goes. */
export const DatabaseUrl = Config.redacted("DATABASE_URL").pipe(Config.withDefault(Redacted.make("petstore.db")))

/**
 * How long the database may take: to open a connection (PostgreSQL; also the longest wait for a connection of the
 * pool), to answer a statement (on SQLite: how long a write waits for a busy database), to become reachable at
 * start-up (PostgreSQL).
 */
export interface PostgresTimeouts {
  readonly connect: Duration.Duration
  readonly query: Duration.Duration
  readonly startup: Duration.Duration
}

/** `DB_QUERY_TIMEOUT`, the one timeout SQLite uses too. */
export const QueryTimeoutConfig = positiveDuration("DB_QUERY_TIMEOUT").pipe(Config.withDefault(Duration.seconds(5)))

export const PostgresTimeoutsConfig: Config.Config<PostgresTimeouts> = Config.all({
  connect: positiveDuration("DB_CONNECT_TIMEOUT").pipe(Config.withDefault(Duration.seconds(5))),
  query: QueryTimeoutConfig,
  startup: duration("DB_STARTUP_TIMEOUT").pipe(Config.withDefault(Duration.seconds(30)))
})

const POSTGRES_URL = /^postgres(?:ql)?:\/\//i

export const isPostgresUrl = (url: string): boolean => POSTGRES_URL.test(url)

const decoded = (text: string): string => {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/** The server a PostgreSQL URL names, for messages: `host:port/database`, never the user's password. */
const serverOf = (url: string): string => {
  if (!URL.canParse(url)) return "the server of DATABASE_URL"
  const parsed = new URL(url)
  const host = parsed.hostname || parsed.searchParams.get("host") || "localhost"
  return `${host}:${parsed.port || "5432"}/${decoded(parsed.pathname.slice(1))}`
}

/** The database as the start-up log line shows it: a SQLite path, or a PostgreSQL URL without its password. */
export const describeDatabase = (url: Redacted.Redacted<string>): string => {
  const value = Redacted.value(url)
  return isPostgresUrl(value) ? `postgresql://${serverOf(value)}` : value
}

/** The start-up gave up: PostgreSQL did not answer in time. The message names the server, never the password. */
export class DatabaseUnavailable extends Schema.TaggedError<DatabaseUnavailable>()("DatabaseUnavailable", {
  message: Schema.String
}) {}

// ---------------------------------------------------------------------------------------------------------- migrations

const runMigrations = Migrator.make({})({ loader: Migrator.fromRecord(migrations) })

/** A fixed 64-bit key, the same in every replica: the ASCII bytes of "petstore". */
const MIGRATION_LOCK = "8099007544119226981"

/**
 * On PostgreSQL, replicas that start at the same moment take turns: the migrator runs while this process holds a
 * session advisory lock on a connection of its own, so a second replica waits for the lock, then finds the migrations
 * applied. (The migrator's own table lock does not cover creating its table, which two replicas would race on.) The
 * lock goes with the connection if the process dies. Waiting for it is a statement like any other: past the statement
 * timeout it fails, and the start-up retries.
 */
const withMigrationLock = <A, E, R>(sql: SqlClient.SqlClient, effect: Effect.Effect<A, E, R>) =>
  Effect.scoped(
    Effect.gen(function*() {
      const connection = yield* sql.reserve
      yield* Effect.acquireRelease(
        connection.executeUnprepared(`SELECT pg_advisory_lock(${MIGRATION_LOCK})`, [], undefined),
        () => Effect.ignore(connection.executeUnprepared(`SELECT pg_advisory_unlock(${MIGRATION_LOCK})`, [], undefined))
      )
      return yield* effect
    })
  )

export const MigrationsLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const applied = yield* sql.onDialectOrElse({
      pg: () => withMigrationLock(sql, runMigrations),
      orElse: () => runMigrations
    })
    if (applied.length > 0) yield* Effect.logDebug("migrations applied", applied.map(([id, name]) => `${id}_${name}`))
  }).pipe(Effect.withSpan("Sql.migrate"))
)

// ------------------------------------------------------------------------------------------------------------- SQLite

/**
 * SQLite: the client, migrated, then (for a file) the statements' reading connection and the writer, opened once
 * the file has its tables and its journal mode. A write waits for a busy database up to `queryTimeout`.
 */
const sqlite = (url: string, queryTimeout: Duration.Duration) =>
  Either.match(sqliteFile(url), {
    onLeft: (error) => Layer.fail(error),
    onRight: (filename) => {
      const migrated = MigrationsLive.pipe(Layer.provideMerge(Sqlite.client(filename)))
      const opened = Sqlite.isInMemory(filename)
        ? migrated
        : Layer.mergeAll(Sqlite.statements(filename), SqliteWriter.layer(filename, queryTimeout)).pipe(
          Layer.provideMerge(migrated)
        )
      return opened.pipe(explainingOpenFailures(filename))
    }
  })

// --------------------------------------------------------------------------------------------------------- PostgreSQL

/** Why a connection failed, in words that name no secret. */
const reasonOf = (error: SqlError.SqlError | Migrator.MigrationError, password: string): string => {
  const cause = error.cause as { message?: unknown; code?: unknown; errors?: ReadonlyArray<{ message?: unknown }> }
  const detail = [cause?.message, cause?.errors?.[0]?.message, cause?.code].find((text) =>
    typeof text === "string" && text.length > 0
  )
  const reason = typeof detail === "string" ? `${error.message}: ${detail}` : error.message
  return password.length > 0 ? reason.replaceAll(password, "***") : reason
}

/**
 * PostgreSQL through `@effect/sql-pg`'s pool: connections that fail are replaced, so the service recovers by itself
 * once the database is back. Until then a statement fails within the timeouts (a 503 for the client). At start-up an
 * unreachable database is retried, once a second, for `startup`; then the layer fails naming the server.
 */
const postgres = (url: Redacted.Redacted<string>, timeouts: PostgresTimeouts) => {
  const value = Redacted.value(url)
  const server = serverOf(value)
  const password = URL.canParse(value) ? decoded(new URL(value).password) : ""
  const isSqlError = (error: SqlError.SqlError | Migrator.MigrationError) => error._tag === "SqlError"
  // A failed migration is not retried: only a database that does not answer (yet). The warning is logged only when
  // another attempt follows, so that nothing comes after the final message.
  const retry = Schedule.spaced("1 second").pipe(
    Schedule.whileInput(isSqlError),
    Schedule.upTo(timeouts.startup),
    Schedule.passthrough,
    Schedule.onDecision((error: SqlError.SqlError | Migrator.MigrationError, decision) =>
      decision._tag === "Continue"
        ? Effect.logWarning(`PostgreSQL at ${server} does not answer yet; retrying`).pipe(
          Effect.annotateLogs("reason", reasonOf(error, password))
        )
        : Effect.void
    )
  )
  return MigrationsLive.pipe(
    Layer.provideMerge(Layer.unwrapEffect(
      // Loaded only when PostgreSQL is used: a SQLite start does not pay for the driver.
      Effect.map(
        Effect.promise(() => import("@effect/sql-pg")),
        ({ PgClient: Pg }): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, SqlError.SqlError> =>
          Pg.layerFromPool({ acquire: Postgres.pool(value, timeouts.query, timeouts.connect) })
      )
    )),
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

// ------------------------------------------------------------------------------------------------------------- choice

export type DatabaseError =
  | DatabaseUnavailable
  | DatabaseFileError
  | Migrator.MigrationError
  | SqlError.SqlError
  | ConfigError.ConfigError

/**
 * The migrated SQL client for a database URL. The timeouts are the given ones, else those of the environment that the
 * backend uses (`DB_CONNECT_TIMEOUT`, `DB_QUERY_TIMEOUT`, `DB_STARTUP_TIMEOUT`; SQLite reads `DB_QUERY_TIMEOUT` alone).
 */
export const layer = (
  url: Redacted.Redacted<string>,
  timeouts?: PostgresTimeouts
): Layer.Layer<SqlClient.SqlClient, DatabaseError> => {
  const value = Redacted.value(url)
  if (isPostgresUrl(value)) {
    return timeouts !== undefined
      ? postgres(url, timeouts)
      : Layer.unwrapEffect(Effect.map(PostgresTimeoutsConfig, (given) => postgres(url, given)))
  }
  return timeouts !== undefined
    ? sqlite(value, timeouts.query)
    : Layer.unwrapEffect(Effect.map(QueryTimeoutConfig, (query) => sqlite(value, query)))
}

/** The migrated SQL client for `DATABASE_URL`. */
export const SqlLive = Layer.unwrapEffect(Effect.map(DatabaseUrl, layer))

/** A fresh in-memory database, for tests. */
export const SqlTest = layer(Redacted.make(":memory:"))
