/**
 * The statements written once for both backends, run on each (a SQLite file: its reading connection and its writer; a
 * SQLite database in memory and PostgreSQL: `@effect/sql`'s client): the same text and values give the same rows, a
 * transaction that fails leaves nothing behind (whether its body waited or not) and fails as its body did, and a lock
 * is held for the rest of its transaction. On a SQLite file, a body that waits holds the writer up to DB_QUERY_TIMEOUT.
 */
import { SqlError } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import {
  Cause,
  ConfigProvider,
  Context,
  Data,
  Deferred,
  Effect,
  Either,
  Exit,
  Fiber,
  FiberRef,
  HashMap,
  Layer,
  Option,
  Ref,
  Schedule,
  Schema
} from "effect"
import * as Sql from "../src/Database/Sql.js"
import { statement, Statements, type Transaction } from "../src/Database/Statements.js"
import { addResponseHeaders, CurrentResponseHeaders } from "../src/ResponseHeaders.js"
import { describeBackends, SQLite } from "./support/backends.js"

const INSERT = statement<{ readonly id: number; readonly name: string }, [name: string, categoryId: number]>(
  `INSERT INTO pets (name, category_id, status) VALUES (?, ?, 'available') RETURNING id, name`,
  Schema.Struct({ id: Schema.Number, name: Schema.String })
)
const NAMES = statement<{ readonly name: string }, [from: number]>(
  `SELECT name FROM pets WHERE id > ? ORDER BY id`,
  Schema.Struct({ name: Schema.String })
)
class Caller extends Context.Tag("test/Caller")<Caller, string>() {}
class Refused extends Data.TaggedError("Refused")<{ readonly reason: string }> {}

/** A step that fails twice, then succeeds: retried on a spaced schedule, so the body waits between the tries. */
const flaky = Effect.gen(function*() {
  const tries = yield* Ref.make(0)
  return Effect.flatMap(Ref.updateAndGet(tries, (n) => n + 1), (n) => n < 3 ? Effect.fail("not yet") : Effect.void)
    .pipe(Effect.retry(Schedule.spaced("15 millis")))
})
/** The message of the defect an exit failed with, if it died. */
const defectOf = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isFailure(exit) ? Option.map(Cause.dieOption(exit.cause), (defect) => (defect as Error).message) : Option.none()
const later = (effect: Effect.Effect<void>) => Effect.zipRight(Effect.sleep("30 millis"), effect)

/** A FiberRef of the test's own. */
const Marked = FiberRef.unsafeMake("unset")
/** A body that changes its fiber's state: a response header, a FiberRef, a log annotation; it may wait first. */
const marking = (waits: boolean) => (tx: Transaction) =>
  Effect.gen(function*() {
    yield* tx.query(INSERT, ["Rex", 1])
    if (waits) yield* Effect.sleep("10 millis")
    yield* addResponseHeaders({ "x-in-transaction": "yes" })
    yield* FiberRef.set(Marked, "set in the body")
    yield* FiberRef.update(FiberRef.currentLogAnnotations, HashMap.set<string, unknown>("in", "the body"))
  })
/**
 * What the caller's fiber holds after a transaction whose body changed its state, as if the body ran in it: its
 * headers, its FiberRef, its log annotations. Run in a fiber of its own, awaited (not joined), so nothing carries over.
 */
const stateAfter = (statements: Statements, waits: boolean) =>
  Effect.flatMap(
    Effect.fork(Effect.zipRight(
      statements.transaction(marking(waits)),
      Effect.all({
        headers: FiberRef.get(CurrentResponseHeaders),
        marked: FiberRef.get(Marked),
        annotation: Effect.map(FiberRef.get(FiberRef.currentLogAnnotations), HashMap.get("in"))
      })
    )),
    (fiber) => Effect.flatten(Fiber.await(fiber))
  )
const keepsFiberState = (statements: Statements) =>
  Effect.gen(function*() {
    for (const waits of [false, true]) {
      expect(yield* stateAfter(statements, waits)).toEqual({
        headers: { "x-in-transaction": "yes" },
        marked: "set in the body",
        annotation: Option.some("the body")
      })
    }
  })

const names = (statements: Statements) => statements.query(NAMES, [0], (rows) => rows.map((row) => row.name))

/** A row mapper with a bug. */
const throwing = (): never => {
  throw new Error("a bug in a row mapper")
}
/**
 * Each way of running a statement, its rows handed to a mapper that throws: a write, a read, two reads, a statement
 * of a transaction. Each is a defect (a 500), never a `SqlError` (a 503 that asks the client to retry); nothing stays.
 */
const throwingMappers = (statements: Statements) =>
  Effect.gen(function*() {
    const exits = yield* Effect.all([
      statements.query(INSERT, ["Rex", 1], throwing),
      statements.query(NAMES, [0], throwing),
      statements.queryBoth(NAMES, [0], NAMES, [0], throwing),
      statements.transaction((tx) => tx.query(INSERT, ["Tom", 1], throwing))
    ].map(Effect.exit))
    expect(exits.map(defectOf)).toEqual(exits.map(() => Option.some("a bug in a row mapper")))
    expect(yield* names(statements)).toEqual(["Rex"])
  })

describeBackends((backend) => {
  /** The service on a fresh database, open for the rest of the test's scope. */
  const on = Effect.gen(function*() {
    const layer = Statements.Default.pipe(Layer.provide(Sql.layer(yield* backend.freshDatabase)))
    return Context.get(yield* Layer.build(layer), Statements)
  })

  describe("Statements", () => {
    it.scoped("runs a transaction's body with the caller's context (its services, its span)", () =>
      Effect.gen(function*() {
        const statements = yield* on
        const seen = yield* statements.transaction((tx) =>
          Effect.zipRight(tx.query(INSERT, ["Rex", 1]), Effect.serviceOption(Caller))
        ).pipe(Effect.provideService(Caller, "the request"))
        expect(seen).toEqual(Option.some("the request"))
      }))

    it.scopedLive("a transaction's body keeps its fiber's state: its headers, FiberRefs, log annotations", () =>
      Effect.flatMap(on, keepsFiberState))

    it.scoped("runs a statement with its values and returns its rows; a write is committed when it succeeds", () =>
      Effect.gen(function*() {
        const statements = yield* on
        const [rex] = yield* statements.query(INSERT, ["Rex", 1])
        expect(rex).toEqual({ id: expect.any(Number), name: "Rex" })
        yield* statements.query(INSERT, ["Tom", 2])
        expect(yield* statements.query(NAMES, [rex.id], (rows) => rows)).toEqual([{ name: "Tom" }])
        expect(yield* names(statements)).toEqual(["Rex", "Tom"])
      }))

    it.scoped("a transaction that fails is rolled back: its writes are not stored", () =>
      Effect.gen(function*() {
        const statements = yield* on
        const failed = yield* statements.transaction((tx) =>
          Effect.zipRight(
            tx.query(INSERT, ["Rex", 1]),
            Effect.fail(new SqlError.SqlError({ cause: "test", message: "the transaction fails" }))
          )
        ).pipe(Effect.either)
        expect(Either.isLeft(failed)).toBe(true)
        yield* statements.transaction((tx) => tx.query(INSERT, ["Tom", 2]))
        expect(yield* names(statements)).toEqual(["Tom"])
      }))

    describe("a body that waits (a sleep, a spaced retry) is all-or-nothing", () => {
      const waits = [
        ["sleeps", Effect.succeed(Effect.sleep("30 millis"))],
        ["retries on a spaced schedule", flaky]
      ] as const
      for (const [how, makeWait] of waits) {
        it.scopedLive(`failing after it ${how}, none of its rows is stored, then or later`, () =>
          Effect.gen(function*() {
            const statements = yield* on
            const wait = yield* makeWait
            const failed = yield* statements.transaction((tx) =>
              Effect.gen(function*() {
                yield* tx.query(INSERT, ["first", 1])
                yield* wait
                yield* tx.query(INSERT, ["second", 1])
                return yield* new Refused({ reason: "the body fails" })
              })
            ).pipe(Effect.either)
            expect(failed).toEqual(Either.left(new Refused({ reason: "the body fails" })))
            expect(yield* names(statements)).toEqual([])
            yield* Effect.sleep("100 millis")
            expect(yield* names(statements)).toEqual([])
          }))

        it.scopedLive(`succeeding after it ${how}, all of its rows are stored`, () =>
          Effect.gen(function*() {
            const statements = yield* on
            const wait = yield* makeWait
            const done = yield* statements.transaction((tx) =>
              Effect.gen(function*() {
                yield* tx.query(INSERT, ["first", 1])
                yield* wait
                yield* tx.query(INSERT, ["second", 1])
                return "done"
              })
            ).pipe(Effect.provideService(Caller, "the request"))
            expect(done).toBe("done")
            expect(yield* names(statements)).toEqual(["first", "second"])
          }))
      }
    })

    it.scoped("a defect in a transaction's body stays a defect, a typed failure stays itself; nothing is stored", () =>
      Effect.gen(function*() {
        const statements = yield* on
        const bug = new Error("a bug in the body")
        const died = yield* statements.transaction((tx) =>
          Effect.zipRight(tx.query(INSERT, ["Rex", 1]), Effect.die(bug))
        )
          .pipe(Effect.exit)
        expect(defectOf(died)).toEqual(Option.some(bug.message))
        expect(Exit.isFailure(died) && Option.isNone(Cause.failureOption(died.cause))).toBe(true)
        const thrown = yield* statements.transaction((tx) =>
          Effect.zipRight(
            tx.query(INSERT, ["Tom", 1]),
            Effect.sync(() => {
              throw bug
            })
          )
        ).pipe(Effect.exit)
        expect(defectOf(thrown)).toEqual(Option.some(bug.message))
        const refused = yield* statements.transaction((tx) =>
          Effect.zipRight(tx.query(INSERT, ["Kit", 1]), new Refused({ reason: "typed" }))
        ).pipe(Effect.either)
        expect(refused).toEqual(Either.left(new Refused({ reason: "typed" })))
        expect(yield* names(statements)).toEqual([])
      }))

    it.scoped("a row mapper that throws is a defect, whichever way its statement runs; never a SqlError", () =>
      Effect.flatMap(on, throwingMappers))

    it.scoped("a statement that fails is a SqlError", () =>
      Effect.gen(function*() {
        const statements = yield* on
        const failed = yield* statements.transaction((tx) => tx.query(statement(`SELECT nothing FROM nowhere`), []))
          .pipe(Effect.either)
        expect(Either.isLeft(failed) && failed.left._tag).toBe("SqlError")
      }))

    it.scoped("a lock held by a transaction is refused to another, and free once the first is over", () =>
      Effect.gen(function*() {
        const statements = yield* on
        const lock = statements.transaction((tx) => tx.tryLock("k"))
        if (backend.name === "SQLite") {
          // The writer's units of one group commit: the second is refused until the first's commit is durable.
          expect(yield* Effect.all([lock, lock], { concurrency: "unbounded" })).toEqual([true, false])
        } else {
          const taken = yield* Deferred.make<void>()
          const release = yield* Deferred.make<void>()
          const holding = statements.transaction((tx) =>
            Effect.zipLeft(
              tx.tryLock("k"),
              Effect.zipRight(Deferred.succeed(taken, undefined), Deferred.await(release))
            )
          )
          const other = Effect.zipLeft(
            Effect.zipRight(Deferred.await(taken), lock),
            Deferred.succeed(release, undefined)
          )
          expect(yield* Effect.all([holding, other], { concurrency: "unbounded" })).toEqual([true, false])
        }
        expect(yield* lock).toBe(true)
      }))
  })
})

describe("Statements on a SQLite file", () => {
  const on = (queryTimeout: string) =>
    Effect.gen(function*() {
      const url = yield* SQLite.freshDatabase
      const layer = Statements.Default.pipe(
        Layer.provide(Sql.layer(url)),
        Layer.provide(Layer.setConfigProvider(ConfigProvider.fromJson({ DB_QUERY_TIMEOUT: queryTimeout })))
      )
      return Context.get(yield* Layer.build(layer), Statements)
    })

  it.scopedLive("a body that waits holds the writer: the writes handed over meanwhile are committed after it", () =>
    Effect.gen(function*() {
      const statements = yield* on("5 seconds")
      const inside = yield* Deferred.make<void>()
      const holding = yield* Effect.fork(statements.transaction((tx) =>
        Effect.gen(function*() {
          yield* tx.query(INSERT, ["first", 1])
          yield* Deferred.succeed(inside, undefined)
          yield* Effect.sleep("50 millis")
          yield* tx.query(INSERT, ["second", 1])
        })
      ))
      yield* Deferred.await(inside)
      yield* statements.query(INSERT, ["meanwhile", 1])
      expect(yield* Fiber.join(holding)).toBeUndefined()
      expect(yield* names(statements)).toEqual(["first", "second", "meanwhile"])
    }))

  it.scopedLive("a body still waiting at DB_QUERY_TIMEOUT is interrupted and rolled back; it fails with a SqlError", () =>
    Effect.gen(function*() {
      const statements = yield* on("200 millis")
      const interrupted = yield* Deferred.make<void>()
      const failed = yield* statements.transaction((tx) =>
        Effect.gen(function*() {
          yield* tx.query(INSERT, ["first", 1])
          yield* Effect.sleep("10 seconds")
          yield* tx.query(INSERT, ["second", 1])
        }).pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined)))
      ).pipe(Effect.either)
      expect(Either.isLeft(failed) && failed.left._tag).toBe("SqlError")
      expect(yield* Deferred.isDone(interrupted)).toBe(true)
      yield* statements.query(INSERT, ["next", 1])
      expect(yield* names(statements)).toEqual(["next"])
    }))

  it.scopedLive("a transaction whose caller is interrupted while its body waits is rolled back; the writer goes on", () =>
    Effect.gen(function*() {
      const statements = yield* on("5 seconds")
      const inside = yield* Deferred.make<void>()
      const interrupted = yield* Deferred.make<void>()
      const caller = yield* Effect.fork(statements.transaction((tx) =>
        Effect.gen(function*() {
          yield* tx.query(INSERT, ["first", 1])
          yield* Deferred.succeed(inside, undefined)
          yield* Effect.never
        }).pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined)))
      ))
      yield* Deferred.await(inside)
      yield* Fiber.interrupt(caller)
      expect(yield* Deferred.isDone(interrupted)).toBe(true)
      yield* statements.query(INSERT, ["next", 1])
      expect(yield* names(statements)).toEqual(["next"])
    }))

  it.scopedLive("a statement of a transaction that has ended is refused as a defect", () =>
    Effect.gen(function*() {
      const statements = yield* on("5 seconds")
      const late = yield* statements.transaction((tx) =>
        Effect.forkDaemon(later(Effect.asVoid(Effect.orDie(tx.query(INSERT, ["late", 1])))))
      )
      const exit = yield* Fiber.await(late)
      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
      expect(String(Exit.isFailure(exit) && Cause.squash(exit.cause))).toMatch(/after its transaction ended/)
      expect(yield* names(statements)).toEqual([])
    }))
})

describe("Statements in memory", () => {
  it.effect("run through @effect/sql's client, the same statements", () =>
    Effect.gen(function*() {
      const statements = yield* Statements
      yield* statements.query(INSERT, ["Rex", 1])
      expect(yield* names(statements)).toEqual(["Rex"])
    }).pipe(Effect.provide(Statements.Default.pipe(Layer.provide(Sql.SqlTest)))))

  it.live("a transaction's body keeps its fiber's state: its headers, FiberRefs, log annotations", () =>
    Effect.flatMap(Statements, keepsFiberState).pipe(
      Effect.provide(Statements.Default.pipe(Layer.provide(Sql.SqlTest)))
    ))

  it.effect("a row mapper that throws is a defect, whichever way its statement runs; never a SqlError", () =>
    Effect.flatMap(Statements, throwingMappers).pipe(
      Effect.provide(Statements.Default.pipe(Layer.provide(Sql.SqlTest)))
    ))
})
