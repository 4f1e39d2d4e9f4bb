/**
 * The statements on a SQLite file, as `bun:sqlite` statements prepared once: the reads on the reading connection
 * (`Sqlite.ts`), the writes as units of the group-commit writer (`SqliteWriter.ts`). The file keeps its own path because
 * a read through `@effect/sql` (a statement compiled, a span and a semaphore per query) costs a request several times
 * the CPU (`npm run bench:cpu`).
 *
 * A transaction's body is a unit of the writer: a body that ends synchronously (every repository's does) runs within
 * the group commit, a savepoint among the others'. A body that waits (a sleep, a spaced retry, a service that yields)
 * holds the writer rather than being refused, so that a body means the same on both backends: its transaction stays
 * open, the writes handed over meanwhile wait for the next commit, and past the unit's deadline (`DB_QUERY_TIMEOUT`)
 * the body's fiber is interrupted, its statements rolled back, and the call fails with a `SqlError`. The call ends
 * only once the body's fiber has, and a statement of the transaction that runs after its unit ended (from a fiber the
 * body left behind) is refused as a defect.
 */
import type { SqlError } from "@effect/sql"
import type { Database } from "bun:sqlite"
import { Effect, type Exit, Fiber, FiberId, FiberSet, Scheduler } from "effect"
import type { StatementHooks } from "../Observability/Hooks.js"
import { type Continuing, statementFailed, type Writer } from "./SqliteUnits.js"
import {
  type AnyStatement,
  describer,
  identity,
  perStatement,
  type Query,
  type QueryBoth,
  type Run,
  type Runner,
  type Transaction
} from "./Statement.js"

/** A statement of a transaction run once the transaction is over: a bug (a fiber the body left running), a defect. */
const STATEMENT_AFTER_TRANSACTION = "A statement ran after its transaction ended"

/**
 * A SQLite file: reads on the reading connection; writes, and every statement of a transaction, on the writer's. The
 * transactions' bodies run in fibers of `fibers`, interrupted when the service's scope closes.
 */
export const onFile = (
  reader: Database,
  writer: Writer,
  fibers: FiberSet.FiberSet<unknown, unknown>,
  { observeStatement, runStatement }: StatementHooks
): Runner => {
  const describe = describer("sqlite")
  const on = (database: Database) => {
    const prepare = perStatement((statement) => database.prepare(statement.text))
    return (statement: AnyStatement, params: ReadonlyArray<unknown>): Array<unknown> =>
      prepare(statement).all(...params as Array<never>)
  }
  const onReader = on(reader)
  const onWriter = on(writer.database)
  /**
   * A statement run on `database`, its rows then decoded and handed to `f` outside of it: only what the driver throws
   * is a `SqlError`; a row that does not decode, or a mapper that throws, is a defect.
   */
  const run =
    (database: typeof onReader) =>
    (statement: AnyStatement, params: ReadonlyArray<unknown>, f: (rows: Array<unknown>) => unknown = identity) =>
      Effect.map(
        runStatement(describe(statement), () => database(statement, params), statementFailed),
        (rows) => f(statement.decode(rows))
      )
  const read = run(onReader)
  const runInTransaction = run(onWriter)
  // Observed as the first statement: the second is a small addition to it.
  const queryBoth = ((first, firstParams, second, secondParams, f) =>
    Effect.map(
      runStatement(
        describe(first),
        () => [onReader(first, firstParams), onReader(second, secondParams)] as const,
        statementFailed
      ),
      ([firstRows, secondRows]) => f(first.decode(firstRows), second.decode(secondRows))
    )) satisfies QueryBoth
  const query: Run = (statement, params, f = identity) =>
    statement.operation === "SELECT"
      ? read(statement, params, f)
      : Effect.map(
        observeStatement(describe(statement), writer.write(() => onWriter(statement, params))),
        (rows) => f(statement.decode(rows))
      )
  const inTransaction = (isOpen: () => boolean): Transaction => {
    const guarded = <A>(effect: () => Effect.Effect<A, SqlError.SqlError>) =>
      Effect.suspend(() => isOpen() ? effect() : Effect.die(new Error(STATEMENT_AFTER_TRANSACTION)))
    return {
      query: ((statement, params, f) => guarded(() => runInTransaction(statement, params, f))) satisfies Run as Query,
      tryLock: (name) => guarded(() => Effect.sync(() => writer.tryLock(name)))
    }
  }
  // The body runs as the writer's unit, in a fiber of `fibers` that starts with the caller's state (its context, its
  // span, its FiberRefs), on a scheduler of its own: as far as it goes synchronously, within the unit. If it waits, it
  // goes on asynchronously and the writer holds the transaction for it, up to the unit's deadline (`SqliteWriter.ts`).
  const transaction = <A, E>(body: (tx: Transaction) => Effect.Effect<A, E>) =>
    Effect.flatMap(FiberSet.runtime(fibers)<never>(), (runFork) => {
      let open = true
      /** The body's fiber, once its turn came. */
      let fiber: Fiber.RuntimeFiber<A, E> | undefined
      const tx = inTransaction(() => open)
      const unit = (): Exit.Exit<A, E> | Continuing<A, E> => {
        const scheduler = new Scheduler.SyncScheduler()
        const running = fiber = runFork(Effect.withScheduler(body(tx), scheduler))
        scheduler.flush()
        const exit = running.unsafePoll()
        if (exit !== null) {
          open = false
          return exit
        }
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
      // Whatever the writer answered, the body's fiber has ended (or is interrupted and waited for) when this does, and
      // what the body changed of its fiber's state (the headers it added, its FiberRefs, its log annotations) is the
      // caller's, as when the body runs in the caller's fiber on the other backends.
      return Effect.ensuring(
        writer.run(unit),
        Effect.suspend(() =>
          fiber === undefined ? Effect.void : Effect.zipRight(Fiber.interrupt(fiber), fiber.inheritAll)
        )
      )
    })
  return { system: "sqlite", query: query as Query, queryBoth, transaction }
}
