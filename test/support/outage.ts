/**
 * A SQL client on an in-memory SQLite database that can be taken down and brought back, to test what the service
 * does while its database cannot answer: while it is down every statement fails with a `SqlError`, as a lost
 * connection or a failing disk would make it.
 */
import { Reactivity } from "@effect/experimental"
import { SqlClient, SqlError, Statement } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import { Database } from "bun:sqlite"
import { Effect, Layer, Ref } from "effect"
import { MigrationsLive } from "../../src/Database/Migrations.js"

export class Outage extends Effect.Service<Outage>()("test/Outage", {
  effect: Effect.map(Ref.make(false), (down) => ({
    down: Ref.get(down),
    set: (isDown: boolean) => Ref.set(down, isDown)
  }))
}) {}

const OutageClient = Layer.scoped(
  SqlClient.SqlClient,
  Effect.gen(function*() {
    const outage = yield* Outage
    const db = yield* Effect.acquireRelease(
      Effect.sync(() => new Database(":memory:")),
      (db) => Effect.sync(() => db.close())
    )
    const run = (sql: string, params: ReadonlyArray<unknown>, values = false) =>
      Effect.flatMap(outage.down, (down) =>
        down
          ? Effect.fail(new SqlError.SqlError({ cause: new Error("connection lost"), message: "The database is down" }))
          : Effect.try({
            try: () => {
              const statement = db.query(sql)
              return (values
                ? statement.values(...(params as Array<any>))
                : statement.all(...(params as Array<any>))) as Array<any>
            },
            catch: (cause) => new SqlError.SqlError({ cause, message: "Failed to execute statement" })
          }))
    const connection: Connection = {
      execute: (sql, params, transformRows) =>
        Effect.map(run(sql, params), (rows) => (transformRows ? transformRows(rows) : rows)),
      executeRaw: (sql, params) => run(sql, params),
      executeValues: (sql, params) => run(sql, params, true),
      executeUnprepared: (sql, params, transformRows) => connection.execute(sql, params, transformRows),
      executeStream: () => Effect.dieMessage("not used") as never
    }
    return yield* SqlClient.make({
      acquirer: Effect.succeed(connection),
      compiler: Statement.makeCompilerSqlite(),
      spanAttributes: []
    })
  })
).pipe(Layer.provide(Reactivity.layer))

/** The switchable client, migrated, with its `Outage` switch. */
export const OutageSqlLive = MigrationsLive.pipe(Layer.provideMerge(OutageClient), Layer.provideMerge(Outage.Default))
