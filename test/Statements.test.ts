/**
 * The statements written once for both backends, run on each (a SQLite file: its reading connection and its writer; a
 * SQLite database in memory and PostgreSQL: `@effect/sql`'s client): the same text and values give the same rows, a
 * transaction that fails leaves nothing behind, and a lock is held for the rest of its transaction.
 */
import { SqlError } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Either, Layer, Option } from "effect"
import * as Sql from "../src/Database/Sql.js"
import { statement, Statements } from "../src/Database/Statements.js"
import { describeBackends } from "./support/backends.js"

const INSERT = statement<{ readonly id: number; readonly name: string }, [name: string, categoryId: number]>(
  `INSERT INTO pets (name, category_id, status) VALUES (?, ?, 'available') RETURNING id, name`
)
const NAMES = statement<{ readonly name: string }, [from: number]>(`SELECT name FROM pets WHERE id > ? ORDER BY id`)
class Caller extends Context.Tag("test/Caller")<Caller, string>() {}

const names = (statements: Statements) => statements.query(NAMES, [0], (rows) => rows.map((row) => row.name))

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

describe("Statements in memory", () => {
  it.effect("run through @effect/sql's client, the same statements", () =>
    Effect.gen(function*() {
      const statements = yield* Statements
      yield* statements.query(INSERT, ["Rex", 1])
      expect(yield* names(statements)).toEqual(["Rex"])
    }).pipe(Effect.provide(Statements.Default.pipe(Layer.provide(Sql.SqlTest)))))
})
