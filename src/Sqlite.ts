/**
 * The SQLite backend: one `bun:sqlite` connection, seen two ways. As an `@effect/sql` `SqlClient` (what migrations,
 * readiness and the portable repositories use: the same client `@effect/sql-sqlite-bun` builds, on a connection we
 * open ourselves), and as the `SqliteDatabase` itself, so that the repositories' SQLite implementations can run their
 * prepared statements directly — no statement compilation, span, semaphore or asynchronous hop per query.
 *
 * bun:sqlite is synchronous, so a prepared statement runs whole between two fibers' steps; the one transaction of the
 * program (the migrations) runs at start-up, before any request.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import { SqlClient, SqlError, Statement } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import { Database } from "bun:sqlite"
import { Context, Effect, Layer, Scope, Stream } from "effect"

/** The open SQLite database, present only when the backend is SQLite. */
export class SqliteDatabase extends Context.Tag("Sql/SqliteDatabase")<SqliteDatabase, Database>() {}

const make = (filename: string) =>
  Effect.gen(function*() {
    const db = yield* Effect.acquireRelease(
      Effect.try({
        try: () => new Database(filename, { readwrite: true, create: true }),
        catch: (cause) => new SqlError.SqlError({ cause, message: `Failed to open ${filename}` })
      }),
      (db) => Effect.sync(() => db.close())
    )
    db.run("PRAGMA journal_mode = WAL;")

    const run = (sql: string, params: ReadonlyArray<unknown> = [], values = false) =>
      Effect.withFiberRuntime<Array<any>, SqlError.SqlError>((fiber) => {
        try {
          const statement = db.query(sql)
          // @ts-ignore bun-types lack safeIntegers on statements
          statement.safeIntegers(Context.get(fiber.currentContext, SqlClient.SafeIntegers))
          const rows = values ? statement.values(...(params as Array<any>)) : statement.all(...(params as Array<any>))
          return Effect.succeed((rows ?? []) as Array<any>)
        } catch (cause) {
          return Effect.fail(new SqlError.SqlError({ cause, message: "Failed to execute statement" }))
        }
      })

    const connection: Connection = {
      execute: (sql, params, transformRows) =>
        transformRows ? Effect.map(run(sql, params), transformRows) : run(sql, params),
      executeRaw: (sql, params) => run(sql, params),
      executeValues: (sql, params) => run(sql, params, true),
      executeUnprepared: (sql, params, transformRows) =>
        transformRows ? Effect.map(run(sql, params), transformRows) : run(sql, params),
      executeStream: () => Stream.dieMessage("executeStream not implemented")
    }

    const semaphore = yield* Effect.makeSemaphore(1)
    const acquirer = semaphore.withPermits(1)(Effect.succeed(connection))
    const transactionAcquirer = Effect.uninterruptibleMask((restore) =>
      Effect.as(
        Effect.zipRight(
          restore(semaphore.take(1)),
          Effect.tap(Effect.scope, (scope) => Scope.addFinalizer(scope, semaphore.release(1)))
        ),
        connection
      )
    )
    const client = yield* SqlClient.make({
      acquirer,
      compiler: Statement.makeCompilerSqlite(),
      transactionAcquirer,
      spanAttributes: [["db.system.name", "sqlite"]]
    })
    return Context.make(SqlClient.SqlClient, client).pipe(Context.add(SqliteDatabase, db))
  })

/** A SQLite file (or `:memory:`) as a `SqlClient`, with the `SqliteDatabase` beside it. */
export const layer = (filename: string): Layer.Layer<SqlClient.SqlClient | SqliteDatabase, SqlError.SqlError> =>
  Layer.scopedContext(make(filename)).pipe(Layer.provide(Reactivity.layer))
