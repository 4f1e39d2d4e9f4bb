/**
 * The long poll under adversity, on SQLite (a file) and PostgreSQL: `wait=0` answers at once; `wait` is a total,
 * however many pets a filter passes over meanwhile; a key revoked while its poll waits is answered 401 and gets no pet
 * created after the revocation; the drain answers every waiting poll; a follower of the feed that throws loses nothing
 * for the others; a row the `Pet` schema refuses is never answered, and `next` never moves past it. The test clock
 * stands still unless moved: a poll that answers has answered for what the test did, not for its wait.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Context, Effect, Exit, Fiber, Option, Scope, Supervisor, TestClock } from "effect"
import { ApiKeys, keyIdOf } from "../src/Auth/ApiKeys.js"
import { Lifecycle } from "../src/Operations/Lifecycle.js"
import { type FeedChange, PetsFeed } from "../src/Pets/Feed.js"
import { type Backend, describeBackends } from "./support/backends.js"
import { keysOfAnotherProcess } from "./support/keys.js"
import { type App, appWith, createRequest, json } from "./support/retries.js"

interface Changes {
  readonly changes: ReadonlyArray<{ readonly position: string; readonly pet: { readonly id: number } }>
  readonly next: string
}

const auth = (key: string): RequestInit => ({ headers: { authorization: `Bearer ${key}` } })

const create = (app: App, name: string, status = "available") =>
  Effect.flatMap(app.fetch("/v1/pets", createRequest(app.key, { name, categoryId: 1, status })), (response) => {
    expect(response.status).toBe(201)
    return json(response) as Effect.Effect<{ readonly id: number }>
  })

const changes = (app: App, query: string, key = app.key) =>
  Effect.flatMap(app.fetch(`/v1/pets/changes?${query}`, auth(key)), (response) => {
    expect(response.status, query).toBe(200)
    return json(response) as Effect.Effect<Changes>
  })

const feedPosition = (app: App) =>
  Effect.map(app.fetch("/v1/pets", auth(app.key)), (response) => response.headers.get("feed-position")!)

/** Lets the fibers the test started run (real time: the test clock does not move). */
const settle = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))

/**
 * The poll's outcome, which must come within 10 s of real time: the test clock stands still, so this bounds the
 * machine's speed (a loaded one too), not the poll's wait.
 */
const answered = <A, E>(poll: Fiber.Fiber<A, E>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 200 && Option.isNone(yield* Fiber.poll(poll)); i++) yield* settle
    expect(Option.isSome(yield* Fiber.poll(poll)), "answered").toBe(true)
    return yield* Fiber.join(poll)
  })

const idsOf = (page: Changes) => page.changes.map((change) => change.pet.id)

describeBackends((backend: Backend) => {
  describe("the long poll", () => {
    it.scoped("wait=0 answers at once: the pets after the position, or an empty page where the feed ends", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        const empty = yield* changes(app, "wait=0")
        expect(empty).toEqual({ changes: [], next: yield* feedPosition(app) })
        const a = yield* create(app, "a")
        const b = yield* create(app, "b", "sold")
        expect(idsOf(yield* changes(app, `after=${empty.next}&wait=0`))).toEqual([a.id, b.id])
        // A filter passes over `a`: the page holds `b`; past `b`, an empty page at the end, at once.
        const sold = yield* changes(app, `after=${empty.next}&wait=0&status=sold`)
        expect(idsOf(sold)).toEqual([b.id])
        expect(yield* changes(app, `after=${sold.next}&wait=0`)).toEqual({ changes: [], next: sold.next })
      }))

    it.scoped("wait is a total: a filtered wait=1 answers by then, though a pet it passes over comes every 300 ms", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        const start = yield* feedPosition(app)
        const poll = yield* Effect.fork(changes(app, "status=sold&wait=1"))
        yield* settle
        for (let i = 0; i < 4; i++) {
          yield* create(app, `passed over ${i}`)
          yield* settle
          yield* TestClock.adjust("300 millis")
        }
        const page = yield* answered(poll)
        expect(page.changes).toEqual([])
        expect(page.next).not.toBe(start)
      }))

    it.scoped("a key revoked while its poll waits: 401 within half a second, and no pet created after the revocation", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        const keys = Context.get(app.context, ApiKeys)
        const revoke = (key: string) => keys.revoke(Option.getOrThrow(keyIdOf(key)))
        // A pet created right after the revocation, before any periodic look at the key.
        const first = yield* app.newKey("first")
        const poll = yield* Effect.fork(app.fetch("/v1/pets/changes?wait=25", auth(first)))
        yield* settle
        yield* revoke(first)
        yield* create(app, "after the revocation")
        const refused = yield* answered(poll)
        expect(refused.status).toBe(401)
        expect(refused.headers.get("www-authenticate")).toMatch(/^Bearer/)
        expect(yield* json(refused)).toMatchObject({ code: "unauthorized", status: 401 })
        // Nothing created: the poll learns of the revocation within half a second.
        const second = yield* app.newKey("second")
        const idle = yield* Effect.fork(app.fetch("/v1/pets/changes?wait=25", auth(second)))
        yield* settle
        yield* revoke(second)
        yield* TestClock.adjust("500 millis")
        expect((yield* answered(idle)).status).toBe(401)
      }))

    it.scoped("a key revoked elsewhere just after its waiting poll's check read it: 401 within half a second", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        const other = yield* keysOfAnotherProcess(app.url)
        const key = yield* app.newKey("revoked elsewhere")
        const poll = yield* Effect.fork(
          Effect.zip(app.fetch("/v1/pets/changes?wait=25", auth(key)), Clock.currentTimeMillis)
        )
        yield* settle
        // The waiting polls' keys are read a moment after the first poll waits: just after that read, the revocation.
        yield* TestClock.adjust("250 millis")
        yield* settle
        const revokedAt = yield* Clock.currentTimeMillis
        expect(yield* other.revoke(Option.getOrThrow(keyIdOf(key)))).toBe(true)
        yield* TestClock.adjust("499 millis")
        const [refused, answeredAt] = yield* answered(poll)
        expect(refused.status).toBe(401)
        expect(answeredAt - revokedAt).toBeLessThan(500)
      }))

    it.scoped("a key revoked elsewhere while its poll waits gets no pet created after the revocation", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        const other = yield* keysOfAnotherProcess(app.url)
        const key = yield* app.newKey("revoked elsewhere")
        const poll = yield* Effect.fork(app.fetch("/v1/pets/changes?wait=25", auth(key)))
        yield* settle
        // The waiting polls' keys have just been read: the key holds.
        yield* TestClock.adjust("250 millis")
        yield* settle
        expect(yield* other.revoke(Option.getOrThrow(keyIdOf(key)))).toBe(true)
        // Created after the revocation (the clock stands still: before any further read of the waiting polls' keys).
        yield* create(app, "after the revocation")
        expect((yield* answered(poll)).status).toBe(401)
      }))

    it.scoped("the drain: a waiting poll answers its page as it stands, at once, and a poll that comes later too", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        const start = yield* feedPosition(app)
        const filtered = yield* Effect.fork(changes(app, "status=sold&wait=25"))
        yield* settle
        const passed = yield* create(app, "passed over")
        yield* settle
        yield* Context.get(app.context, Lifecycle).stopAccepting
        const page = yield* answered(filtered)
        expect(page.changes).toEqual([])
        expect(page.next).not.toBe(start)
        const later = yield* Effect.fork(changes(app, `after=${page.next}&wait=25`))
        expect(yield* answered(later)).toEqual({ changes: [], next: page.next })
        expect(passed.id).toBeGreaterThan(0)
      }))

    it.scoped("a follower that throws is dropped and told; the other followers and a waiting poll get every change", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        const feed = Context.get(app.context, PetsFeed)
        const told: Array<unknown> = []
        const boom = new Error("a follower's bug")
        yield* feed.join({
          deliver: () => {
            throw boom
          },
          dropped: (defect) => told.push(defect)
        })
        const seen: Array<FeedChange> = []
        yield* feed.join({ deliver: (changes) => seen.push(...changes) > 0, dropped: () => told.push("the other") })
        const poll = yield* Effect.fork(changes(app, "wait=25"))
        yield* settle
        const a = yield* create(app, "a")
        const page = yield* answered(poll)
        expect(idsOf(page)[0]).toBe(a.id)
        const b = yield* create(app, "b")
        for (let i = 0; i < 40 && seen.length < 2; i++) yield* settle
        expect(seen.map((change) => change.pet?.id)).toEqual([a.id, b.id])
        expect(told).toEqual([boom])
      }))

    it.scoped("a row the Pet schema refuses: a page ends before it, one that begins with it is a 500; a filter passes it over", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        const a = yield* create(app, "a")
        const waiting = yield* Effect.fork(
          app.fetch(`/v1/pets/changes?after=${yield* feedPosition(app)}`, auth(app.key))
        )
        yield* settle
        // Written around the API: a name the schema refuses.
        yield* app.sql`INSERT INTO pets (name, category_id, status) VALUES (${""}, 1, 'available')`
        const c = yield* create(app, "c", "sold")
        // The waiting poll is handed the refused pet first: a 500, its position not passed.
        expect((yield* answered(waiting)).status).toBe(500)
        const page = yield* changes(app, "after=start")
        expect(idsOf(page)).toEqual([a.id])
        expect(page.next).toBe(page.changes[0].position)
        const refused = yield* app.fetch(`/v1/pets/changes?after=${page.next}`, auth(app.key))
        expect(refused.status).toBe(500)
        // Still refused when asked again: nothing past it is answered to this poll...
        expect((yield* app.fetch(`/v1/pets/changes?after=${page.next}&wait=0`, auth(app.key))).status).toBe(500)
        // ...and a filter that passes over it goes on.
        expect(idsOf(yield* changes(app, `after=${page.next}&status=sold`))).toEqual([c.id])
      }))

    it.scoped("every fiber the feed and its polls start ends when the application's scope closes", () =>
      Effect.gen(function*() {
        const supervisor = yield* Supervisor.track
        const scope = yield* Scope.make()
        const app = yield* Scope.extend(appWith(backend), scope).pipe(Effect.supervised(supervisor))
        yield* Scope.extend(Context.get(app.context, PetsFeed).join({ deliver: () => true, dropped: () => {} }), scope)
        const poll = yield* Effect.fork(app.fetch("/v1/pets/changes?wait=25", auth(app.key)))
        yield* settle
        yield* create(app, "a")
        yield* answered(poll)
        yield* Effect.fork(app.fetch("/v1/pets/changes?status=sold&wait=25", auth(app.key)))
        yield* settle
        const started = yield* supervisor.value
        expect(started.length).toBeGreaterThan(0)
        yield* Scope.close(scope, Exit.void)
        for (const fiber of started) expect(Option.isSome(yield* Fiber.poll(fiber)), String(fiber.id())).toBe(true)
      }))
  })
})
