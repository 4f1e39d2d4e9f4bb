/**
 * The database: the one place that knows which backend stores the catalogue. It opens the client from
 * `DATABASE_URL`, sets the connection up for durability, and runs the bundled migrations before anything else uses it.
 */
import { Migrator, SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-bun"
import { Config, Effect, Layer } from "effect"
import { migrations } from "./migrations/index.js"

export const DatabaseUrl = Config.string("DATABASE_URL").pipe(Config.withDefault("petstore.db"))

const runMigrations = Migrator.make({})({ loader: Migrator.fromRecord(migrations) })

export const MigrationsLive = Layer.effectDiscard(
  runMigrations.pipe(
    Effect.tap((applied) =>
      applied.length === 0 ? Effect.void : Effect.logDebug("migrations applied", applied.map(([id, name]) => `${id}_${name}`))
    ),
    Effect.withSpan("Sql.migrate")
  )
)

/** SQLite: WAL, a commit is fsynced before it returns (a 201 survives a crash), and writers from other processes wait. */
const sqlite = (filename: string) =>
  Layer.effectDiscard(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe("PRAGMA busy_timeout = 5000")
      yield* sql.unsafe("PRAGMA synchronous = FULL")
    })
  ).pipe(Layer.provideMerge(SqliteClient.layer({ filename })))

/** The SQL client for a database URL, migrated. */
export const layer = (url: string) => MigrationsLive.pipe(Layer.provideMerge(sqlite(url)))

/** The SQL client for `DATABASE_URL`, migrated. */
export const SqlLive = Layer.unwrapEffect(Effect.map(DatabaseUrl, layer))

/** A fresh in-memory database, for tests. */
export const SqlTest = layer(":memory:")
