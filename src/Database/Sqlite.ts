/**
 * The SQLite backend: `@effect/sql-sqlite-bun`'s client (migrations, readiness and the statements of an in-memory
 * database use it), and for a file two `bun:sqlite` connections of the statements' own (`Statements.ts`): the
 * `SqliteDatabase`, which only reads, and the `SqliteWriter`'s. The connections share the file as processes would:
 * WAL, in which readers do not wait for a writer. An in-memory database is private to its connection, so it gets the
 * client alone.
 */
import { SqlClient, SqlError } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-bun"
import { Database } from "bun:sqlite"
import { Context, type Duration, Effect, Either, Layer } from "effect"
import { migrations, MigrationsLive } from "./Migrations.js"
import { explainingOpenFailures, IN_MEMORY, sqliteFile } from "./SqliteFile.js"
import { makeWriter, SqliteWriter } from "./SqliteWriter.js"

/** The statements' reading connection to the SQLite file; absent for PostgreSQL and for `:memory:`. */
export class SqliteDatabase extends Context.Tag("Sql/SqliteDatabase")<SqliteDatabase, Database>() {}

/**
 * The client's connection writes at start-up (migrations) and in memory, where waiting on the thread is what is
 * wanted: WAL, a commit fsynced before it returns, a writer that waits for the others.
 */
const client = (filename: string) =>
  Layer.effectDiscard(Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.forEach(
      ["PRAGMA journal_mode = WAL", "PRAGMA busy_timeout = 5000", "PRAGMA synchronous = FULL"],
      (pragma) => sql.unsafe(pragma)
    ))).pipe(Layer.provideMerge(SqliteClient.layer({ filename }).pipe(Layer.orDie)))

/**
 * The reading connection and the writer's, closed with the layer. The reader waits little: in WAL a reader waits only
 * in rare moments (another connection recovering the WAL after a crash), and a wait here holds the event loop.
 */
const connections = (filename: string, queryTimeout: Duration.Duration) =>
  Layer.scopedContext(Effect.gen(function*() {
    const open = <A>(connect: () => A, close: (connection: A) => Effect.Effect<void>) =>
      Effect.acquireRelease(
        Effect.try({
          try: connect,
          catch: (cause) => new SqlError.SqlError({ cause, message: `Failed to open ${filename}` })
        }),
        close
      )
    const reader = yield* open(() => {
      const db = new Database(filename, { readwrite: true, create: true })
      db.run("PRAGMA busy_timeout = 250")
      db.run("PRAGMA query_only = ON")
      return db
    }, (db) => Effect.sync(() => db.close()))
    // Closing the writer waits for the syncs of its last commits: the scope closes once they are answered.
    const writer = yield* open(
      () => makeWriter(new Database(filename, { readwrite: true, create: false }), queryTimeout),
      (writer) => writer.close
    )
    return Context.make(SqliteDatabase, reader).pipe(Context.add(SqliteWriter, writer))
  }))

/**
 * The migrated client on the database `url` names, then, for a file (which has its tables and WAL by then), the reader
 * and the writer, whose writes wait for a busy database up to `queryTimeout`.
 */
export const layer = (url: string, queryTimeout: Duration.Duration) =>
  Either.match(sqliteFile(url), {
    onLeft: (error) => Layer.fail(error),
    onRight: (filename) => {
      const migrated = MigrationsLive.pipe(Layer.provideMerge(client(filename)))
      const opened = filename === IN_MEMORY
        ? migrated
        : connections(filename, queryTimeout).pipe(Layer.provideMerge(migrated))
      return opened.pipe(explainingOpenFailures(filename))
    }
  })

/** The id of the last bundled migration (`0005_…` is 5). */
const LATEST_MIGRATION = Math.max(...Object.keys(migrations).map((id) => Number(id.split("_")[0])))

/**
 * For a command that only reads (`keys list`): the existing SQLite file `filename` on a read-only client, so that read
 * access is enough. A database that lacks a bundled migration (or is no catalogue yet) gets the migrated `layer`,
 * which needs write access, as every other command does.
 */
export const readingLayer = (filename: string, queryTimeout: Duration.Duration) =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const context = yield* Layer.build(
      SqliteClient.layer({ filename, readonly: true, readwrite: false, create: false, disableWAL: true }).pipe(
        Layer.orDie
      )
    )
    const sql = Context.get(context, SqlClient.SqlClient)
    const current = yield* sql<
      { readonly id: number | null }
    >`SELECT max(migration_id) AS id FROM effect_sql_migrations`
      .pipe(
        Effect.map((rows) => (rows[0]?.id ?? 0) >= LATEST_MIGRATION),
        Effect.catchIf((error) => String(error.cause).includes("no such table"), () => Effect.succeed(false))
      )
    return current ? Layer.succeedContext(context) : layer(filename, queryTimeout)
  })).pipe(explainingOpenFailures(filename, "read"))
