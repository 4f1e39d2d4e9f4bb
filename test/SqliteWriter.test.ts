/**
 * The SQLite writer on a real file: group commit (the writes handed over together are committed together, each unit
 * in a savepoint of its own), a unit that throws fails alone, a commit that fails fails its units, and a database
 * held by another connection is waited for with the event loop free, up to the deadline.
 */
import { describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { Duration, Effect, Either, Fiber } from "effect"
import { makeWriter } from "../src/Database/SqliteWriter.js"
import { tempDatabaseFile } from "./support/files.js"

const TIMEOUT = Duration.millis(400)

/** A database file with a table, a writer on it and a second connection (another process, as far as locks go). */
const setUp = Effect.gen(function*() {
  const file = yield* tempDatabaseFile
  const setup = new Database(file)
  setup.run("PRAGMA journal_mode = WAL")
  setup.run("CREATE TABLE parents (id INTEGER PRIMARY KEY)")
  setup.run(
    "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, " +
      "parent INTEGER REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED)"
  )
  setup.close()
  const writerConnection = new Database(file)
  writerConnection.run("PRAGMA foreign_keys = ON")
  const writer = makeWriter(writerConnection, TIMEOUT)
  const other = new Database(file)
  other.run("PRAGMA busy_timeout = 0")
  yield* Effect.addFinalizer(() =>
    Effect.zipRight(
      writer.close,
      Effect.sync(() => {
        writerConnection.close()
        other.close()
      })
    )
  )
  const insert = writer.database.prepare<{ id: number }, [string, number | null]>(
    "INSERT INTO items (name, parent) VALUES (?, ?) RETURNING id"
  )
  const committed = () =>
    (other.query("SELECT name FROM items ORDER BY id").all() as Array<{ name: string }>).map((r) => r.name)
  return { writer, other, insert, committed }
})

describe("SqliteWriter", () => {
  it.scopedLive("commits the writes handed over together in one transaction, and succeeds only once it is committed", () =>
    Effect.gen(function*() {
      const { committed, insert, writer } = yield* setUp
      // Each unit reports what another connection sees: nothing, while the units of the batch are not committed.
      const seen = yield* Effect.forEach(
        ["a", "b", "c", "d", "e"],
        (name) => writer.write(() => (insert.get(name, null), committed().length)),
        { concurrency: "unbounded" }
      )
      expect(seen).toEqual([0, 0, 0, 0, 0])
      expect(committed()).toEqual(["a", "b", "c", "d", "e"])
    }))

  it.scopedLive("a unit that throws is rolled back and fails alone", () =>
    Effect.gen(function*() {
      const { committed, insert, writer } = yield* setUp
      const outcomes = yield* Effect.forEach(
        ["a", "b", "c"],
        (name) =>
          Effect.either(writer.write(() => {
            insert.get(name, null)
            if (name === "b") insert.get("a", null) // a UNIQUE violation, after b's own row
            return name
          })),
        { concurrency: "unbounded" }
      )
      expect(outcomes.map(Either.isRight)).toEqual([true, false, true])
      const failure = outcomes[1]
      if (Either.isLeft(failure)) expect(String(failure.left.cause)).toContain("UNIQUE")
      expect(committed()).toEqual(["a", "c"])
    }))

  it.scopedLive("a commit that fails fails every unit of its transaction, and the next ones commit", () =>
    Effect.gen(function*() {
      const { committed, insert, writer } = yield* setUp
      // A deferred foreign key is checked at COMMIT: the unit with the missing parent makes the commit fail.
      const outcomes = yield* Effect.forEach(
        [["a", null], ["b", 42], ["c", null]] as const,
        ([name, parent]) => Effect.either(writer.write(() => insert.get(name, parent))),
        { concurrency: "unbounded" }
      )
      expect(outcomes.map(Either.isLeft)).toEqual([true, true, true])
      expect(committed()).toEqual([])
      yield* writer.write(() => insert.get("d", null))
      expect(committed()).toEqual(["d"])
    }))

  it.scopedLive("a lock taken in a unit is held until its transaction settles, committed or not", () =>
    Effect.gen(function*() {
      const { insert, writer } = yield* setUp
      const locking = (name: string, parent: number | null = null) =>
        writer.write(() => {
          const locked = writer.tryLock("key")
          insert.get(name, parent)
          return locked
        }).pipe(Effect.either)
      // The units of one transaction: the first takes the lock, the second finds it held.
      const together = yield* Effect.forEach(["a", "b"], (name) => locking(name), { concurrency: "unbounded" })
      expect(together).toEqual([Either.right(true), Either.right(false)])
      // Settled, the lock is free again; a commit that fails (a deferred foreign key) releases it too.
      expect(yield* locking("c", 42)).toMatchObject({ _tag: "Left" })
      expect(yield* locking("d")).toEqual(Either.right(true))
      expect(() => writer.tryLock("key")).toThrow(/inside a unit/)
    }))

  it.scopedLive("waits for a database another connection holds without holding the event loop, then commits", () =>
    Effect.gen(function*() {
      const { committed, insert, other, writer } = yield* setUp
      other.run("BEGIN IMMEDIATE")
      let ticks = 0
      const ticker = setInterval(() => ticks++, 10)
      const started = Date.now()
      const fiber = yield* Effect.fork(writer.write(() => insert.get("waited", null)))
      yield* Effect.sleep("150 millis")
      // The event loop turned while the write waited; nothing is committed yet.
      expect(ticks).toBeGreaterThan(5)
      expect(committed()).toEqual([])
      other.run("COMMIT")
      yield* Fiber.join(fiber)
      clearInterval(ticker)
      expect(Date.now() - started).toBeLessThan(Duration.toMillis(TIMEOUT))
      expect(committed()).toEqual(["waited"])
    }))

  it.scopedLive("fails a write with a SqlError once the database has stayed busy past the deadline", () =>
    Effect.gen(function*() {
      const { committed, insert, other, writer } = yield* setUp
      other.run("BEGIN IMMEDIATE")
      const started = Date.now()
      const outcome = yield* Effect.either(writer.write(() => insert.get("late", null)))
      const waited = Date.now() - started
      other.run("COMMIT")
      expect(Either.isLeft(outcome)).toBe(true)
      if (Either.isLeft(outcome)) expect(outcome.left._tag).toBe("SqlError")
      expect(waited).toBeGreaterThanOrEqual(Duration.toMillis(TIMEOUT) - 5)
      expect(committed()).toEqual([])
      // Free again: the next write goes through.
      yield* writer.write(() => insert.get("next", null))
      expect(committed()).toEqual(["next"])
    }))

  it.scopedLive("a write interrupted before its turn does not run", () =>
    Effect.gen(function*() {
      const { committed, insert, other, writer } = yield* setUp
      other.run("BEGIN IMMEDIATE")
      const fiber = yield* Effect.fork(writer.write(() => insert.get("abandoned", null)))
      yield* Effect.sleep("20 millis")
      yield* Fiber.interrupt(fiber)
      other.run("COMMIT")
      yield* writer.write(() => insert.get("kept", null))
      expect(committed()).toEqual(["kept"])
    }))

  it.scopedLive("closing waits for the sync of the last commit: its unit is answered, then the writer is closed", () =>
    Effect.gen(function*() {
      const { committed, insert, writer } = yield* setUp
      let closing: Promise<void> | undefined
      // Closed right after the commit, while its sync runs.
      const outcome = yield* Effect.either(writer.write(() => {
        insert.get("a", null)
        queueMicrotask(() => closing = Effect.runPromise(writer.close))
      }))
      expect(outcome).toEqual(Either.right(undefined))
      yield* Effect.promise(() => closing!)
      expect(committed()).toEqual(["a"])
      expect(yield* Effect.either(writer.write(() => insert.get("b", null)))).toMatchObject({
        left: { message: "The database is closed" }
      })
    }))

  it.scopedLive("closing while a unit holds the transaction stops it and rolls its turn back", () =>
    Effect.gen(function*() {
      const { committed, insert, writer } = yield* setUp
      let stopped = false
      const holding = yield* Effect.fork(Effect.either(writer.run(() => {
        insert.get("held", null)
        return { onEnd: () => {}, stop: () => (stopped = true) }
      })))
      yield* Effect.sleep("20 millis")
      const queued = yield* Effect.fork(Effect.either(writer.write(() => insert.get("queued", null))))
      yield* Effect.sleep("20 millis")
      yield* writer.close
      for (const fiber of [holding, queued]) {
        expect(yield* Fiber.join(fiber)).toMatchObject({ left: { message: "The database is closed" } })
      }
      expect(stopped).toBe(true)
      expect(committed()).toEqual([])
    }))
})
