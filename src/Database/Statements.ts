/**
 * The service that runs the repositories' statements (`Statement.ts`): through `@effect/sql`'s client on PostgreSQL
 * and on an in-memory SQLite database (the client writes its dialect's placeholders); on a SQLite file, on its own
 * connections (`SqliteStatements.ts`).
 * Rows are decoded by their statement's schema before anything reads them (PostgreSQL's BIGINTs are read as numbers,
 * `Postgres.ts`, so rows come as SQLite's do); a row that does not decode is a defect.
 *
 * A transaction is all-or-nothing on every backend, whatever its body does, and fails as its body does (a defect stays
 * a defect; only a statement's own error is a `SqlError`).
 */
import { SqlClient, SqlError } from "@effect/sql"
import { Effect, FiberSet, Option, Schema } from "effect"
import { type StatementHooks, statementHooks } from "../Observability/Hooks.js"
import { SqliteDatabase } from "./Sqlite.js"
import { onFile } from "./SqliteStatements.js"
import { SqliteWriter } from "./SqliteWriter.js"
import {
  describer,
  identity,
  type Query,
  type QueryBoth,
  type Run,
  type Runner,
  statement,
  type Transaction
} from "./Statement.js"

export { type Query, type QueryBoth, type Statement, statement, type Transaction } from "./Statement.js"

/** Transaction-scoped, so it goes with the transaction whatever happens; a 64-bit hash of the name names it. */
const TRY_LOCK = statement<{ readonly locked: boolean }, [string]>(
  `SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0)) AS locked`,
  Schema.Struct({ locked: Schema.Boolean }),
  "advisory_locks"
)
/** The first statement of a transaction whose reads see one snapshot. */
const SNAPSHOT = statement(`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`, undefined, "transactions")

/** `@effect/sql`'s client: PostgreSQL, or a SQLite database in memory. */
const onClient = (sql: SqlClient.SqlClient, { observeStatement }: StatementHooks): Runner => {
  const system = sql.onDialectOrElse({ pg: () => "postgresql" as const, orElse: () => "sqlite" as const })
  const describe = describer(system)
  const query = ((statement, params, f = identity) =>
    observeStatement(
      describe(statement),
      Effect.map(sql(statement.strings, ...params as Array<never>), (rows) =>
        f(statement.decode(rows as ReadonlyArray<unknown>)))
    )) satisfies Run as Query
  const tryLock = system === "postgresql"
    ? (name: string) => query(TRY_LOCK, [name], (rows) => rows[0]?.locked === true)
    : () => Effect.succeed(true)
  const inTransaction: Transaction = { query, tryLock }
  const snapshot = system === "postgresql" ? query(SNAPSHOT, []) : Effect.void
  /**
   * `withTransaction` dies when its COMMIT or ROLLBACK fails (a connection lost on the way): that is a database that
   * does not answer, a `SqlError` as a statement's is, not a bug.
   */
  const withTransaction = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.catchAllDefect(
      sql.withTransaction(effect),
      (defect) => defect instanceof SqlError.SqlError ? Effect.fail(defect) : Effect.die(defect)
    )
  const queryBoth: QueryBoth = (first, firstParams, second, secondParams, f) =>
    withTransaction(
      Effect.zipRight(snapshot, Effect.zipWith(query(first, firstParams), query(second, secondParams), f))
    )
  return { system, query, queryBoth, transaction: (body) => withTransaction(body(inTransaction)) }
}

export class Statements extends Effect.Service<Statements>()("Statements", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const reader = yield* Effect.serviceOption(SqliteDatabase)
    const writer = yield* Effect.serviceOption(SqliteWriter)
    const hooks = yield* statementHooks
    return Option.isSome(reader) && Option.isSome(writer)
      ? onFile(reader.value, writer.value, yield* FiberSet.make(), hooks)
      : onClient(sql, hooks)
  })
}) {}
