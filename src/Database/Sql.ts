/**
 * The database: the one place that knows which backend stores the catalogue. `DATABASE_URL` picks it once: a
 * `postgres://` or `postgresql://` URL selects PostgreSQL (several replicas may share one database), anything else is a
 * SQLite file path (or `:memory:`). Either way this layer provides a `SqlClient` on which the bundled migrations have
 * run; the repositories, the handlers and the command line do not know which backend they run on.
 */
import type { Migrator, SqlClient, SqlError } from "@effect/sql"
import { Config, type ConfigError, Duration, Effect, Either, Layer, Redacted } from "effect"
import { existsSync } from "node:fs"
import { duration, positiveDuration } from "../Config.js"
import * as Postgres from "./Postgres.js"
import * as Sqlite from "./Sqlite.js"
import { type DatabaseFileError, IN_MEMORY, sqliteFile } from "./SqliteFile.js"
import * as SqliteOwner from "./SqliteOwner.js"

/** Where the catalogue is stored. It may carry a password: it stays `Redacted` wherever it goes. */
export const DatabaseUrl = Config.redacted("DATABASE_URL").pipe(Config.withDefault(Redacted.make("petstore.db")))

/** `DB_QUERY_TIMEOUT`, how long a statement may take (on SQLite: how long a write waits for a busy database). */
const QueryTimeoutConfig = positiveDuration("DB_QUERY_TIMEOUT").pipe(Config.withDefault(Duration.seconds(5)))

/**
 * How long PostgreSQL may take: to open a connection (also the longest wait for a connection of the pool), to answer a
 * statement, to become reachable at start-up.
 */
export const PostgresTimeoutsConfig = Config.all({
  connect: positiveDuration("DB_CONNECT_TIMEOUT").pipe(Config.withDefault(Duration.seconds(5))),
  query: QueryTimeoutConfig,
  startup: duration("DB_STARTUP_TIMEOUT").pipe(Config.withDefault(Duration.seconds(30)))
})
export type PostgresTimeouts = Config.Config.Success<typeof PostgresTimeoutsConfig>

export const isPostgresUrl = (url: string): boolean => /^postgres(?:ql)?:\/\//i.test(url)

/** The database as the start-up log line shows it: a SQLite path, or a PostgreSQL URL without its password. */
export const describeDatabase = (url: Redacted.Redacted<string>): string => {
  const value = Redacted.value(url)
  return isPostgresUrl(value) ? `postgresql://${Postgres.serverOf(value)}` : value
}

type DatabaseError =
  | Postgres.DatabaseUnavailable
  | Postgres.DatabaseRefused
  | DatabaseFileError
  | Migrator.MigrationError
  | SqlError.SqlError
  | ConfigError.ConfigError

/**
 * The migrated SQL client for a database URL, with the timeouts of the environment that the backend uses
 * (`DB_CONNECT_TIMEOUT`, `DB_QUERY_TIMEOUT`, `DB_STARTUP_TIMEOUT`; SQLite reads `DB_QUERY_TIMEOUT` alone).
 */
export const layer = (url: Redacted.Redacted<string>): Layer.Layer<SqlClient.SqlClient, DatabaseError> => {
  const value = Redacted.value(url)
  return isPostgresUrl(value)
    ? Layer.unwrapEffect(Effect.map(PostgresTimeoutsConfig, (timeouts) => Postgres.layer(url, timeouts)))
    : Layer.unwrapEffect(Effect.map(QueryTimeoutConfig, (query) => Sqlite.layer(value, query)))
}

/**
 * The database for a command that only reads (`keys list`): an existing SQLite file read-only (read access is enough;
 * `Sqlite.readingLayer`), else `layer`.
 */
export const readingLayer = (url: Redacted.Redacted<string>): Layer.Layer<SqlClient.SqlClient, DatabaseError> => {
  const value = Redacted.value(url)
  const file = isPostgresUrl(value) ? undefined : Either.getOrUndefined(sqliteFile(value))
  return file === undefined || file === IN_MEMORY || !existsSync(file)
    ? layer(url)
    : Layer.unwrapEffect(Effect.map(QueryTimeoutConfig, (query) => Sqlite.readingLayer(file, query)))
}

/**
 * The database as `serve` holds it: `layer`, and for a SQLite file its ownership (`SqliteOwner.ts`: one server per
 * file), taken before the file is opened and migrated. `started`, asked at the stop, says whether the service started:
 * a SQLite file this start created is removed if it did not.
 */
export const servedLayer = (
  url: Redacted.Redacted<string>,
  started: Effect.Effect<boolean>
): Layer.Layer<SqlClient.SqlClient, DatabaseError> => {
  const value = Redacted.value(url)
  return isPostgresUrl(value) ? layer(url) : layer(url).pipe(
    Layer.provide(Layer.scopedDiscard(Effect.flatMap(sqliteFile(value), (file) => SqliteOwner.own(file, started))))
  )
}

/** A fresh in-memory database, for tests. */
export const SqlTest = layer(Redacted.make(":memory:"))
