/**
 * The repositories' statements, written once for both backends (SQL text with `?` placeholders), and the service that
 * runs them: through `@effect/sql`'s client on PostgreSQL and on an in-memory SQLite database (the client writes its
 * dialect's placeholders); on a SQLite file, as `bun:sqlite` statements prepared once, the reads on the reading
 * connection (`Sqlite.ts`), the writes as units of the group-commit writer (`SqliteWriter.ts`). The file keeps its own
 * path because a read through `@effect/sql` (a statement compiled, a span and a semaphore per query) costs a request
 * several times the CPU (`npm run bench:cpu`).
 * Rows are as the drivers give them, which are the rows' types: NOT NULL and CHECK constraints hold the columns, and
 * PostgreSQL's BIGINTs are read as numbers (`Postgres.ts`).
 *
 * A transaction is all-or-nothing on every backend, whatever its body does, and fails as its body does (a defect stays
 * a defect; only a statement's own error is a `SqlError`). On a SQLite file the body is a unit of the writer: a body
 * that ends synchronously (every repository's does) runs within the group commit, a savepoint among the others'. A
 * body that waits (a sleep, a spaced retry, a service that yields) holds the writer rather than being refused, so that
 * a body means the same on both backends: its transaction stays open, the writes handed over meanwhile wait for the
 * next commit, and past the unit's deadline (`DB_QUERY_TIMEOUT`) the body's fiber is interrupted, its statements rolled
 * back, and the call fails with a `SqlError`. The call ends only once the body's fiber has, and a statement of the
 * transaction that runs after its unit ended (from a fiber the body left behind) is refused as a defect.
 */
import { SqlClient, SqlError } from "@effect/sql"
import type { Database } from "bun:sqlite"
import { Effect, type Exit, Fiber, FiberId, Option, Runtime, Scheduler } from "effect"
import { type Statement as Observed, type StatementHooks, statementHooks } from "../Observability/Hooks.js"
import { SqliteDatabase } from "./Sqlite.js"
import { type Continuing, SqliteWriter, statementFailed, type Writer } from "./SqliteWriter.js"

/** A statement: its text, the values its placeholders take, the rows it returns. */
export interface Statement<Row, Params extends ReadonlyArray<unknown>> {
  readonly text: string
  /** The text around the placeholders, as a template literal's strings (for `@effect/sql`'s compiler). */
  readonly strings: TemplateStringsArray
  /** As observability names it: its first word (`SELECT`, `INSERT`, `UPDATE`) and its table. */
  readonly operation: string
  readonly collection: string
  /** Never set: carries the types of the rows and the values. */
  readonly types?: { readonly row: Row; readonly params: Params }
}

/** A statement on `collection`: by default the table its text names first (after FROM, INTO or UPDATE). */
export const statement = <Row = never, Params extends ReadonlyArray<unknown> = []>(
  text: string,
  collection = /\b(?:FROM|INTO|UPDATE)\s+(\w+)/i.exec(text)?.[1] ?? ""
): Statement<Row, Params> => {
  const strings = text.split("?")
  const operation = text.slice(0, text.indexOf(" "))
  return { text, strings: Object.assign(strings, { raw: strings }), operation, collection }
}

/** Runs a statement and hands its rows to `f` (by default: the rows), in the statement's own step. */
export type Query = <Row, Params extends ReadonlyArray<unknown>, A = Array<Row>>(
  statement: Statement<Row, Params>,
  params: Params,
  f?: (rows: Array<Row>) => A
) => Effect.Effect<A, SqlError.SqlError>

/**
 * Runs two reads that see one state of the database and hands both rows to `f`: on a SQLite file, back to back on the
 * reading connection in one synchronous step (the writer commits only in a turn of its own); through `@effect/sql`, in
 * one transaction (PostgreSQL: REPEATABLE READ, READ ONLY, so that both read one snapshot).
 */
export type QueryBoth = <Row1, Params1 extends ReadonlyArray<unknown>, Row2, Params2 extends ReadonlyArray<unknown>, A>(
  first: Statement<Row1, Params1>,
  firstParams: Params1,
  second: Statement<Row2, Params2>,
  secondParams: Params2,
  f: (first: Array<Row1>, second: Array<Row2>) => A
) => Effect.Effect<A, SqlError.SqlError>

export interface Transaction {
  readonly query: Query
  /**
   * Takes the lock called `name` for the rest of the transaction, without waiting: false when another transaction
   * holds it (PostgreSQL: an advisory lock, for every replica; a SQLite file: the writer's; in memory, transactions
   * run one at a time and need none).
   */
  readonly tryLock: (name: string) => Effect.Effect<boolean, SqlError.SqlError>
}

/** The statements of a backend. */
interface Runner {
  readonly system: Observed["system"]
  /** Runs one statement: a `SELECT` reads; any other writes, committed (durably) before it succeeds. */
  readonly query: Query
  /** Runs two `SELECT`s that see one state of the database. */
  readonly queryBoth: QueryBoth
  /**
   * Runs `body`'s statements in one transaction, committed (durably) before it succeeds, rolled back if it fails; it
   * fails as the body does (a defect stays a defect), or with a `SqlError` when the transaction cannot be committed.
   */
  readonly transaction: <A, E>(
    body: (tx: Transaction) => Effect.Effect<A, E>
  ) => Effect.Effect<A, E | SqlError.SqlError>
}

type AnyStatement = Statement<any, any>
/** A `Query` as its implementations see it. */
type Run = (
  statement: AnyStatement,
  params: ReadonlyArray<unknown>,
  f?: (rows: Array<unknown>) => unknown
) => Effect.Effect<unknown, SqlError.SqlError>
const identity = (rows: Array<unknown>) => rows

/** A statement of a transaction run once the transaction is over: a bug (a fiber the body left running), a defect. */
const STATEMENT_AFTER_TRANSACTION = "A statement ran after its transaction ended"

/** Transaction-scoped, so it goes with the transaction whatever happens; a 64-bit hash of the name names it. */
const TRY_LOCK = statement<{ readonly locked: boolean }, [string]>(
  `SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0)) AS locked`,
  "advisory_locks"
)
/** The first statement of a transaction whose reads see one snapshot. */
const SNAPSHOT = statement(`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`, "transactions")

/** `make` of each statement, made at its first use. */
const perStatement = <A>(make: (statement: AnyStatement) => A) => {
  const made = new Map<AnyStatement, A>()
  return (statement: AnyStatement): A => {
    let value = made.get(statement)
    if (value === undefined) made.set(statement, value = make(statement))
    return value
  }
}

const describer = (system: Observed["system"]) =>
  perStatement(({ collection, operation, text }): Observed => ({ system, operation, collection, text }))

/** A SQLite file: reads on the reading connection; writes, and every statement of a transaction, on the writer's. */
const onFile = (reader: Database, writer: Writer, { observeStatement, runStatement }: StatementHooks): Runner => {
  const describe = describer("sqlite")
  const on = (database: Database) => {
    const prepare = perStatement((statement) => database.prepare(statement.text))
    const all = (statement: AnyStatement, params: ReadonlyArray<unknown>) =>
      prepare(statement).all(...params as Array<never>)
    return {
      all,
      run: (statement: AnyStatement, params: ReadonlyArray<unknown>, f: (rows: Array<unknown>) => unknown) => () =>
        f(all(statement, params))
    }
  }
  const onReader = on(reader)
  const onWriter = on(writer.database)
  // Observed as the first statement: the second is a small addition to it.
  const queryBoth = ((first, firstParams, second, secondParams, f) =>
    runStatement(
      describe(first),
      () => f(onReader.all(first, firstParams) as Array<never>, onReader.all(second, secondParams) as Array<never>),
      statementFailed
    )) satisfies QueryBoth
  const query: Run = (statement, params, f = identity) =>
    statement.operation === "SELECT"
      ? runStatement(describe(statement), onReader.run(statement, params, f), statementFailed)
      : observeStatement(describe(statement), writer.write(onWriter.run(statement, params, f)))
  const inTransaction = (isOpen: () => boolean): Transaction => {
    const guarded = <A>(effect: () => Effect.Effect<A, SqlError.SqlError>) =>
      Effect.suspend(() => isOpen() ? effect() : Effect.die(new Error(STATEMENT_AFTER_TRANSACTION)))
    return {
      query:
        ((statement, params, f = identity) =>
          guarded(() =>
            runStatement(describe(statement), onWriter.run(statement, params, f), statementFailed)
          )) satisfies Run as Query,
      tryLock: (name) => guarded(() => Effect.sync(() => writer.tryLock(name)))
    }
  }
  // The body runs as the writer's unit, with the caller's context (its span, its log annotations, its services), on a
  // scheduler of its own: as far as it goes synchronously, within the unit. If it waits, it goes on asynchronously and
  // the writer holds the transaction for it, up to the unit's deadline (`SqliteWriter.ts`).
  const transaction = <A, E>(body: (tx: Transaction) => Effect.Effect<A, E>) =>
    Effect.flatMap(Effect.runtime<never>(), (runtime) => {
      let open = true
      /** The body's fiber, once it waits. */
      let waiting: Fiber.RuntimeFiber<A, E> | undefined
      const tx = inTransaction(() => open)
      const unit = (): Exit.Exit<A, E> | Continuing<A, E> => {
        const scheduler = new Scheduler.SyncScheduler()
        const running = Runtime.runFork(runtime)(body(tx), { scheduler })
        scheduler.flush()
        const exit = running.unsafePoll()
        if (exit !== null) {
          open = false
          return exit
        }
        waiting = running
        return {
          onEnd: (done) =>
            running.addObserver((exit) => {
              open = false
              done(exit)
            }),
          stop: () => {
            open = false
            running.unsafeInterruptAsFork(FiberId.none)
          }
        }
      }
      // Whatever the writer answered, the body's fiber has ended (or is interrupted and waited for) when this does.
      return Effect.ensuring(
        writer.run(unit),
        Effect.suspend(() => waiting === undefined ? Effect.void : Fiber.interrupt(waiting))
      )
    })
  return { system: "sqlite", query: query as Query, queryBoth, transaction }
}

/** `@effect/sql`'s client: PostgreSQL, or a SQLite database in memory. */
const onClient = (sql: SqlClient.SqlClient, { observeStatement }: StatementHooks): Runner => {
  const system = sql.onDialectOrElse({ pg: () => "postgresql" as const, orElse: () => "sqlite" as const })
  const describe = describer(system)
  const query = ((statement, params, f = identity) =>
    observeStatement(
      describe(statement),
      Effect.map(sql(statement.strings, ...params as Array<never>), (rows) => f(rows as Array<unknown>))
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
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const reader = yield* Effect.serviceOption(SqliteDatabase)
    const writer = yield* Effect.serviceOption(SqliteWriter)
    const hooks = yield* statementHooks
    return Option.isSome(reader) && Option.isSome(writer)
      ? onFile(reader.value, writer.value, hooks)
      : onClient(sql, hooks)
  })
}) {}
