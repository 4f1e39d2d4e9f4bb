/**
 * The SQLite backend: `@effect/sql-sqlite-bun`'s client (migrations, readiness and the statements of an in-memory
 * database use it), and for a file two `bun:sqlite` connections of the statements' own (`Statements.ts`): the
 * `SqliteDatabase`, which only reads, and the `SqliteWriter`'s, which never waits for a busy database on the
 * JavaScript thread. The connections share the file as processes would: WAL, in which readers do not
 * wait for a writer. An in-memory database is private to its connection, so it gets the client alone.
 */
import { SqlClient, SqlError } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-bun"
import { Database } from "bun:sqlite"
import { Context, Effect, Layer } from "effect"

/** The statements' reading connection to the SQLite file; absent for PostgreSQL and for `:memory:`. */
export class SqliteDatabase extends Context.Tag("Sql/SqliteDatabase")<SqliteDatabase, Database>() {}

/**
 * WAL, a commit is fsynced before it returns, and a writer waits for the others: the client's connection writes at
 * start-up (migrations) and in memory, where waiting on the thread is what is wanted.
 */
const PRAGMAS = ["PRAGMA journal_mode = WAL", "PRAGMA busy_timeout = 5000", "PRAGMA synchronous = FULL"] as const

/**
 * The reading connection waits little: in WAL a reader waits only in rare moments (another connection recovering the
 * WAL after a crash), and a wait here holds the event loop.
 */
const READER_PRAGMAS = ["PRAGMA busy_timeout = 250", "PRAGMA query_only = ON"] as const

export const isInMemory = (filename: string): boolean => filename === ":memory:"

/** The library's client on the file, with the pragmas on its connection. */
export const client = (filename: string): Layer.Layer<SqlClient.SqlClient, SqlError.SqlError> =>
  Layer.effectDiscard(
    Effect.flatMap(SqlClient.SqlClient, (sql) => Effect.forEach(PRAGMAS, (pragma) => sql.unsafe(pragma)))
  )
    .pipe(Layer.provideMerge(SqliteClient.layer({ filename }).pipe(Layer.orDie)))

/** The statements' reading connection to the file. */
export const statements = (filename: string): Layer.Layer<SqliteDatabase, SqlError.SqlError> =>
  Layer.scoped(
    SqliteDatabase,
    Effect.acquireRelease(
      Effect.try({
        try: () => {
          const db = new Database(filename, { readwrite: true, create: true })
          for (const pragma of READER_PRAGMAS) db.run(pragma)
          return db
        },
        catch: (cause) => new SqlError.SqlError({ cause, message: `Failed to open ${filename}` })
      }),
      (db) => Effect.sync(() => db.close())
    )
  )
