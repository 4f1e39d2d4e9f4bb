/**
 * The change feed's long poll (`GET /v1/pets/changes`) and the list's `Feed-Position`, on SQLite (a file and in memory)
 * and PostgreSQL: list then follow sees exactly the pets created after the list, none twice; a waiting poll answers
 * when a pet is created (the test clock never reaches its `wait`), and empty once `wait` has passed; a status filter
 * still moves `next`; a position the feed cannot resume from is a 410; and with concurrent creates through two
 * replicas of one PostgreSQL database, every follower on either replica sees every acknowledged pet once, in one order.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Option, type Scope, Stream, TestClock, TestServices } from "effect"
import { FEED_CHANNEL, Notifications } from "../src/Database/Notifications.js"
import * as Sql from "../src/Database/Sql.js"
import { LISTEN_LINGER, PetsFeed } from "../src/Pets/Feed.js"
import { PetsRepo } from "../src/Pets/Repo.js"
import { type Backend, describeBackends, describePostgres, SQLite } from "./support/backends.js"
import { type App, appOn, appOnDatabase, appWith, createRequest, json } from "./support/retries.js"

interface Change {
  readonly position: string
  readonly pet: { readonly id: number; readonly name: string; readonly status: string }
}
interface Changes {
  readonly changes: ReadonlyArray<Change>
  readonly next: string
}

const auth = (key: string): RequestInit => ({ headers: { authorization: `Bearer ${key}` } })

const create = (app: App, name: string, status = "available") =>
  Effect.flatMap(app.fetch("/v1/pets", createRequest(app.key, { name, categoryId: 1, status })), (response) => {
    expect(response.status).toBe(201)
    return json(response) as Effect.Effect<{ readonly id: number; readonly name: string }>
  })

const changes = (app: App, query: string) =>
  Effect.flatMap(app.fetch(`/v1/pets/changes?${query}`, auth(app.key)), (response) => {
    expect(response.status, query).toBe(200)
    return json(response) as Effect.Effect<Changes>
  })

const feedPosition = (app: App, query = "") =>
  Effect.map(app.fetch(`/v1/pets${query}`, auth(app.key)), (response) => {
    expect(response.status).toBe(200)
    return response.headers.get("feed-position")!
  })

/** Lets a request started in another fiber reach its wait (real time: the test clock does not move). */
const settle = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))

/** Each place the feed is served from: SQLite on a file and in memory, PostgreSQL when given. */
const suites = (
  suite: (name: string, makeApp: Effect.Effect<App, unknown, Scope.Scope>) => void
) => {
  describeBackends((backend: Backend) => suite(backend.name, appWith(backend)))
  describe("SQLite in memory", () => suite("in memory", appOnDatabase(Sql.SqlTest)))
}

suites((_, makeApp) => {
  describe("the change feed", () => {
    it.scoped("list then follow from Feed-Position: exactly the pets created after the list, none twice", () =>
      Effect.gen(function*() {
        const app = yield* makeApp
        for (const name of ["a", "b", "c"]) yield* create(app, name)
        const position = yield* feedPosition(app, "?limit=1")
        expect(position).toMatch(/^[0-9a-f]{16}\.[1-9][0-9]*$/)
        // One of them sent with an Idempotency-Key, and sent again: its replay adds no pet, and no change.
        const keyed = createRequest(app.key, { name: "e", categoryId: 1 }, "once")
        const later = [yield* create(app, "d"), yield* Effect.flatMap(app.fetch("/v1/pets", keyed), json)]
        expect((yield* app.fetch("/v1/pets", keyed)).headers.get("idempotent-replayed")).toBe("true")
        const page = yield* changes(app, `after=${position}&wait=1`)
        expect(page.changes.map((change) => change.pet)).toEqual(later)
        expect(page.next).toBe(page.changes[1].position)
        // Resumed from `next`: nothing new, so empty once `wait` has passed, still at the same position.
        const resumed = yield* Effect.fork(changes(app, `after=${page.next}&wait=1`))
        yield* settle
        yield* TestClock.adjust("1 second")
        expect(yield* Fiber.join(resumed)).toEqual({ changes: [], next: page.next })
        // `start` replays every pet, in order; a limit pages it.
        const first = yield* changes(app, "after=start&limit=2")
        expect(first.changes.map((change) => change.pet.name)).toEqual(["a", "b"])
        const rest = yield* changes(app, `after=${first.next}`)
        expect(rest.changes.map((change) => change.pet.name)).toEqual(["c", "d", "e"])
      }))

    it.scoped("a waiting poll answers with the pet created meanwhile, before its wait", () =>
      Effect.gen(function*() {
        const app = yield* makeApp
        const empty = yield* feedPosition(app)
        expect(empty).toMatch(/\.0$/)
        const poll = yield* Effect.fork(changes(app, "wait=25"))
        yield* settle
        const pet = yield* create(app, "Rex")
        // The test clock moves only past the periodic check, far from the 25 seconds of the wait.
        yield* TestClock.adjust("250 millis")
        const page = yield* Fiber.join(poll)
        expect(page.changes.map((change) => change.pet)).toEqual([pet])
        expect(page.next).toBe(page.changes[0].position)
      }))

    it.scoped("a status filter answers only matching pets, and next moves past the others", () =>
      Effect.gen(function*() {
        const app = yield* makeApp
        const position = yield* feedPosition(app)
        yield* create(app, "a")
        yield* create(app, "b")
        const passing = yield* Effect.fork(changes(app, `after=${position}&status=sold&wait=1`))
        yield* settle
        yield* TestClock.adjust("1 second")
        const passed = yield* Fiber.join(passing)
        expect(passed.changes).toEqual([])
        expect(passed.next).not.toBe(position)
        const sold = yield* create(app, "c", "sold")
        const page = yield* changes(app, `after=${passed.next}&status=sold`)
        expect(page.changes.map((change) => change.pet)).toEqual([sold])
        // The same pets unfiltered: all three, the sold one at the position the filtered page gave it.
        const all = yield* changes(app, `after=${position}`)
        expect(all.changes.map((change) => change.pet.name)).toEqual(["a", "b", "c"])
        expect(all.changes[2].position).toBe(page.changes[0].position)
      }))

    it.scoped("410 feed_position_gone for a malformed position, another database's, or one ahead of the feed", () =>
      Effect.gen(function*() {
        const app = yield* makeApp
        const other = yield* makeApp
        yield* create(app, "a")
        yield* create(other, "b")
        const here = yield* feedPosition(app)
        const there = yield* feedPosition(other)
        const [database, end] = here.split(".")
        expect(there.split(".")[0]).not.toBe(database)
        for (
          const after of [
            "abc",
            `${database}.x`,
            `${database}.-1`,
            `${database}.01`,
            there,
            `${database}.${Number(end) + 1}`
          ]
        ) {
          const response = yield* app.fetch(`/v1/pets/changes?after=${encodeURIComponent(after)}`, auth(app.key))
          expect(response.status, after).toBe(410)
          expect(yield* json(response)).toEqual({
            code: "feed_position_gone",
            message: expect.stringContaining("Feed-Position"),
            status: 410
          })
        }
        // The start of this database's feed resumes.
        expect((yield* changes(app, `after=${database}.0`)).changes).toHaveLength(1)
        // The key is checked first, as on every operation.
        expect((yield* app.fetch("/v1/pets/changes?after=abc")).status).toBe(401)
      }))
  })
})

describe("the long poll's wait", () => {
  it.scoped("is 20 seconds unless asked, up to 25, whatever REQUEST_TIMEOUT (its endpoint is a LongPoll)", () =>
    Effect.gen(function*() {
      const app = yield* appOnDatabase(Sql.SqlTest)
      const waiting = yield* Effect.fork(changes(app, ""))
      const longest = yield* Effect.fork(changes(app, "wait=25"))
      yield* settle
      yield* TestClock.adjust("19 seconds")
      yield* settle
      expect(Option.isNone(yield* Fiber.poll(waiting))).toBe(true)
      yield* TestClock.adjust("1 second")
      expect((yield* Fiber.join(waiting)).changes).toEqual([])
      yield* settle
      expect(Option.isNone(yield* Fiber.poll(longest))).toBe(true)
      yield* TestClock.adjust("5 seconds")
      expect((yield* Fiber.join(longest)).changes).toEqual([])
    }))
})

/** Follows the feed from `start` until it has seen `total` pets; the changes in the order it got them. */
const follow = (app: App, total: () => number, done: () => boolean) =>
  Effect.gen(function*() {
    const seen: Array<Change> = []
    let after = "start"
    while (!done() || seen.length < total()) {
      const page = yield* changes(app, `after=${after}&wait=1&limit=7`)
      seen.push(...page.changes)
      after = page.next
    }
    return seen
  })

const checkDelivery = (acknowledged: ReadonlyArray<number>, followers: ReadonlyArray<ReadonlyArray<Change>>) => {
  const [first] = followers
  for (const seen of followers) {
    // Exactly the acknowledged pets, each once, in the one order every follower sees.
    expect(seen.map((change) => change.pet.id)).toEqual(first.map((change) => change.pet.id))
    expect(seen.map((change) => change.position)).toEqual(first.map((change) => change.position))
  }
  const ids = first.map((change) => change.pet.id)
  expect(new Set(ids).size).toBe(ids.length)
  expect([...ids].sort((a, b) => a - b)).toEqual([...acknowledged].sort((a, b) => a - b))
  const positions = first.map((change) => Number(change.position.split(".")[1]))
  for (let i = 1; i < positions.length; i++) expect(positions[i]).toBeGreaterThan(positions[i - 1])
}

/** Creates `perWriter` pets from each of `writers` fibers (round robin over the apps) while followers follow. */
const concurrently = (apps: ReadonlyArray<App>, writers: number, perWriter: number) =>
  Effect.gen(function*() {
    const acknowledged: Array<number> = []
    let finished = false
    const followers = yield* Effect.forEach(
      [...apps, ...apps],
      (app) => Effect.fork(follow(app, () => acknowledged.length, () => finished))
    )
    yield* Effect.forEach(
      Array.from({ length: writers }, (_, w) => w),
      (w) =>
        Effect.forEach(Array.from({ length: perWriter }, (_, i) => i), (i) =>
          Effect.map(create(apps[(w + i) % apps.length], `w${w} ${i}`, i % 3 === 0 ? "sold" : "available"), (pet) => {
            acknowledged.push(pet.id)
          })),
      { concurrency: "unbounded", discard: true }
    )
    finished = true
    checkDelivery(acknowledged, yield* Fiber.joinAll(followers))
    expect(acknowledged).toHaveLength(writers * perWriter)
  })

describe("SQLite", () => {
  it.live("concurrent creates: every follower sees every acknowledged pet once, in one order", () =>
    Effect.scoped(Effect.gen(function*() {
      const app = yield* appWith(SQLite)
      yield* concurrently([app], 6, 20)
    })))
})

describePostgres((backend) => {
  /**
   * Whether the pool hands out all its connections (10) at once: as many transactions, each holding its connection
   * until all have one. A connection lost to the pool keeps the last from starting (real time, 5 s at most).
   */
  const poolWhole = (sql: SqlClient.SqlClient) =>
    Effect.gen(function*() {
      let holding = 0
      const all = yield* Deferred.make<void>()
      const holders = yield* Effect.forkAll(Array.from({ length: 10 }, () =>
        sql.withTransaction(Effect.gen(function*() {
          yield* sql`SELECT 1`
          if (++holding === 10) yield* Deferred.succeed(all, undefined)
          yield* Deferred.await(all)
        }))))
      for (let i = 0; i < 100 && holding < 10; i++) yield* settle
      yield* Fiber.interrupt(holders)
      return holding === 10
    })

  it.scoped("followers that join and leave within milliseconds leave the pool every connection", () =>
    Effect.gen(function*() {
      const app = yield* appWith(backend)
      const feed = Context.get(app.context, PetsFeed)
      expect(yield* poolWhole(app.sql)).toBe(true)
      // Each leaves while the feed may still be reserving the connection it listens on; some a little later.
      yield* TestServices.provideLive(
        Effect.gen(function*() {
          for (let i = 0; i < 30; i++) {
            yield* Effect.scoped(Effect.zipRight(
              feed.join({ deliver: () => true, dropped: () => {} }),
              i % 3 === 0 ? Effect.void : Effect.sleep(i % 3)
            ))
          }
        }).pipe(Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => new Error("the pool ran dry") }))
      )
      // Nobody follows: once the feed has stopped listening, the pool has all its connections again.
      yield* settle
      yield* TestClock.adjust(LISTEN_LINGER)
      expect(yield* poolWhole(app.sql)).toBe(true)
    }))

  it.live("two replicas, concurrent creates: every follower on either sees every acknowledged pet once, in one order", () =>
    Effect.scoped(Effect.gen(function*() {
      const url = yield* backend.freshDatabase
      const replicas = [yield* appOn(url), yield* appOn(url)]
      yield* concurrently(replicas, 8, 20)
    })))

  it.live("a create notifies the feed's channel once it commits: the other replicas' wake-up", () =>
    Effect.scoped(Effect.gen(function*() {
      const app = yield* appWith(backend)
      // Provided by the PostgreSQL layer, beside its client.
      const listening = Context.unsafeGet(app.context, Notifications).listen(FEED_CHANNEL)
      const woken = yield* Effect.fork(Stream.runHead(listening))
      yield* Effect.sleep("300 millis")
      yield* create(app, "Rex")
      expect(Option.isSome(yield* Fiber.join(woken).pipe(Effect.timeout("5 seconds")))).toBe(true)
    })))

  it.live("a create that commits late is not skipped: the next create waits for it, a follower sees both in order", () =>
    Effect.scoped(Effect.gen(function*() {
      const app = yield* appWith(backend)
      const repo = Context.get(app.context, PetsRepo)
      const sql = Context.get(app.context, SqlClient.SqlClient)
      const position = yield* feedPosition(app)
      // A create whose transaction stays open for a while after its insert.
      const inserted = yield* Deferred.make<void>()
      const slow = yield* Effect.fork(sql.withTransaction(
        repo.create({ name: "slow", categoryId: 1, status: "available" }).pipe(
          Effect.zipRight(Deferred.succeed(inserted, undefined)),
          Effect.zipRight(Effect.sleep("600 millis"))
        )
      ))
      yield* Deferred.await(inserted)
      const quick = yield* Effect.fork(create(app, "quick"))
      yield* Effect.sleep("150 millis")
      const seen: Array<Change> = []
      let after = position
      for (let polls = 0; polls < 5 && seen.length < 2; polls++) {
        const page = yield* changes(app, `after=${after}&wait=1`)
        seen.push(...page.changes)
        after = page.next
      }
      yield* Fiber.join(slow)
      yield* Fiber.join(quick)
      expect(seen.map((change) => change.pet.name)).toEqual(["slow", "quick"])
    })))
})
