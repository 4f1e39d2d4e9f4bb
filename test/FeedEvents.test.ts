/**
 * The change feed as Server-Sent Events (`Accept: text/event-stream`), in process, on SQLite and PostgreSQL: the
 * events and their ids, the id-only blocks of a filtered stream, resuming with `Last-Event-ID`, `event: reset`, the
 * per-key and per-process limits, a revoked key, and the drain (a client that stops reading: FeedEventsCatchUp.test.ts).
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Fiber, Option } from "effect"
import { ApiKeys, keyIdOf } from "../src/Auth/ApiKeys.js"
import { Lifecycle } from "../src/Operations/Lifecycle.js"
import { FeedLimitsConfig } from "../src/Pets/FeedLimits.js"
import { type Backend, describeBackends, describePostgres } from "./support/backends.js"
import { type App, appOn, appWith, createRequest, json } from "./support/retries.js"
import { type Block, readEvents } from "./support/sse.js"

const streamRequest = (key: string, headers: Record<string, string> = {}): RequestInit => ({
  headers: { authorization: `Bearer ${key}`, accept: "text/event-stream", ...headers }
})

const create = (app: App, name: string, status = "available") =>
  Effect.flatMap(app.fetch("/v1/pets", createRequest(app.key, { name, categoryId: 1, status })), (response) => {
    expect(response.status).toBe(201)
    return json(response) as Effect.Effect<{ readonly id: number; readonly name: string; readonly status: string }>
  })

const open = (app: App, query = "", headers: Record<string, string> = {}, key = app.key) =>
  Effect.map(app.fetch(`/v1/pets/changes${query}`, streamRequest(key, headers)), (response) => {
    expect(response.status, query).toBe(200)
    expect(response.headers.get("content-type")).toBe("text/event-stream")
    expect(response.headers.get("x-accel-buffering")).toBe("no")
    return readEvents(response)
  })

/** The next block that is not a heartbeat. */
const next = (reader: ReturnType<typeof readEvents>, timeoutMillis?: number) =>
  Effect.promise(async () => {
    while (true) {
      const block = await reader.next(timeoutMillis)
      if (block?.comment !== "heartbeat") return block
    }
  })

/** The blocks up to the end of the stream (heartbeats left out). */
const rest = (reader: ReturnType<typeof readEvents>, timeoutMillis?: number) =>
  Effect.promise(async () => {
    const blocks: Array<Block> = []
    for (let block = await reader.next(timeoutMillis); block !== undefined; block = await reader.next(timeoutMillis)) {
      if (block.comment !== "heartbeat") blocks.push(block)
    }
    return blocks
  })

describeBackends((backend: Backend) => {
  describe("the change feed as Server-Sent Events", () => {
    it.scopedLive("a retry hint, then a created event per pet in commit order, its id the pet's position", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        const first = yield* create(app, "a")
        const reader = yield* open(app, "?after=start")
        expect((yield* next(reader))?.retry).toBeGreaterThan(0)
        const a = yield* next(reader)
        expect(a).toMatchObject({ event: "created" })
        expect(JSON.parse(a!.data!)).toEqual(first)
        const second = yield* create(app, "b")
        const b = yield* next(reader)
        expect(JSON.parse(b!.data!)).toEqual(second)
        // Positions are `<feed id>.<n>`, growing, the same as the long poll's.
        const page = yield* Effect.flatMap(
          app.fetch("/v1/pets/changes?after=start", { headers: { authorization: `Bearer ${app.key}` } }),
          json
        )
        expect([a!.id, b!.id]).toEqual(page.changes.map((change: { position: string }) => change.position))
        yield* Effect.promise(() => reader.cancel())
      }))

    it.scopedLive("a filtered stream sends an id-only block for each pet it passes over", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        const reader = yield* open(app, "?status=sold")
        yield* next(reader)
        yield* create(app, "a")
        const sold = yield* create(app, "b", "sold")
        const passed = yield* next(reader)
        expect(passed).toEqual({ id: expect.stringMatching(/\.\d+$/) })
        const matched = yield* next(reader)
        expect(matched).toMatchObject({ event: "created" })
        expect(JSON.parse(matched!.data!)).toEqual(sold)
        yield* Effect.promise(() => reader.cancel())
      }))

    it.scopedLive("Last-Event-ID resumes exactly after it, in place of ?after", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        yield* create(app, "a")
        yield* create(app, "b")
        yield* create(app, "c")
        const first = yield* open(app, "?after=start")
        yield* next(first)
        yield* next(first)
        const b = yield* next(first)
        yield* Effect.promise(() => first.cancel())
        const again = yield* open(app, "?after=start", { "last-event-id": b!.id! })
        yield* next(again)
        const c = yield* next(again)
        expect(JSON.parse(c!.data!).name).toBe("c")
        yield* Effect.promise(() => again.cancel())
      }))

    it.scopedLive("a position it cannot resume from: event reset with the 410's body, then the stream ends", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        for (const position of ["nonsense", "0123456789abcdef.1", "now"]) {
          const reader = yield* open(app, "", { "last-event-id": position === "now" ? "9".repeat(16) : position })
          const blocks = yield* rest(reader)
          expect(blocks.at(-1)?.event, position).toBe("reset")
          expect(JSON.parse(blocks.at(-1)!.data!)).toMatchObject({ code: "feed_position_gone", status: 410 })
          // An EventSource that ignores the reset reconnects after the last `retry:` it read: minutes, not seconds.
          const retries = blocks.flatMap((block) => block.retry === undefined ? [] : [block.retry])
          expect(retries.at(-1), position).toBeGreaterThanOrEqual(5 * 60_000)
        }
      }))

    it.scopedLive("FEED_STREAMS_PER_KEY: the next stream of the key is a 429 with Retry-After; a closed one frees its place", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend, { FEED_STREAMS_PER_KEY: "2" })
        const one = yield* open(app)
        const two = yield* open(app)
        const refused = yield* app.fetch("/v1/pets/changes", streamRequest(app.key))
        expect(refused.status).toBe(429)
        expect(refused.headers.get("retry-after")).toMatch(/^\d+$/)
        expect(yield* json(refused)).toMatchObject({ code: "too_many_streams", status: 429 })
        // Another key has places of its own; the long poll is no stream.
        const other = yield* open(app, "", {}, yield* app.newKey("other"))
        yield* Effect.promise(() => one.cancel())
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
        const three = yield* open(app)
        for (const reader of [two, three, other]) yield* Effect.promise(() => reader.cancel())
      }))

    it.scopedLive("a HEAD is answered a stream's headers at once, and holds no place among the limits", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend, { FEED_STREAMS_PER_KEY: "1" })
        for (let i = 0; i < 3; i++) {
          const head = yield* app.fetch("/v1/pets/changes", { ...streamRequest(app.key), method: "HEAD" })
          expect(head.status).toBe(200)
          expect(head.headers.get("content-type")).toBe("text/event-stream")
          expect(yield* Effect.promise(() => head.text())).toBe("")
        }
        const reader = yield* open(app)
        yield* Effect.promise(() => reader.cancel())
      }))

    it.scopedLive("FEED_STREAMS: past it, a 503 with Retry-After", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend, { FEED_STREAMS: "1" })
        const one = yield* open(app)
        const refused = yield* app.fetch("/v1/pets/changes", streamRequest(yield* app.newKey("other")))
        expect(refused.status).toBe(503)
        expect(refused.headers.get("retry-after")).toMatch(/^\d+$/)
        expect(yield* json(refused)).toMatchObject({ code: "unavailable", status: 503 })
        yield* Effect.promise(() => one.cancel())
      }))

    it.scopedLive("revoking the key ends its streams within a second, with an unauthorized error event", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        const key = yield* app.newKey("revoked")
        const reader = yield* open(app, "", {}, key)
        yield* next(reader)
        const keys = Context.get(app.context, ApiKeys)
        const started = Date.now()
        yield* keys.revoke(Option.getOrThrow(keyIdOf(key)))
        const blocks = yield* rest(reader, 2_000)
        expect(Date.now() - started).toBeLessThan(1_500)
        expect(blocks.at(-1)?.event).toBe("error")
        expect(JSON.parse(blocks.at(-1)!.data!)).toMatchObject({ code: "unauthorized", status: 401 })
      }))

    it.scopedLive("when the server stops accepting connections (the drain), its streams end at once", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        const reader = yield* open(app)
        yield* next(reader)
        yield* Context.get(app.context, Lifecycle).stopAccepting
        expect(yield* rest(reader, 1_000)).toEqual([])
      }))

    it.scopedLive("the drain ends at once a stream whose client has stopped reading, what it has not read dropped", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        const stopped = yield* open(app)
        const reading = yield* open(app)
        for (const reader of [stopped, reading]) yield* next(reader)
        yield* create(app, "a")
        const b = yield* create(app, "b")
        // Both streams were written the same events: once one has read b, the other holds a and b unread.
        while ((yield* next(reading))?.data?.includes(b.name) !== true);
        yield* Context.get(app.context, Lifecycle).stopAccepting
        const ended = yield* Effect.promise(() =>
          Promise.race([stopped.closed.then(() => true), new Promise((done) => setTimeout(() => done(false), 1_000))])
        )
        expect(ended).toBe(true)
      }))

    it.scopedLive("a stream opened once the server has stopped accepting connections ends at once", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        yield* Context.get(app.context, Lifecycle).stopAccepting
        // No event: the client reconnects, to another replica.
        expect(yield* rest(yield* open(app, "?after=start"), 1_000)).toEqual([{ retry: 2_000 }])
      }))

    it.scopedLive("a pet whose event cannot be written ends only the streams that would write it; nobody loses the others", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        const all = yield* open(app)
        const sold = yield* open(app, "?status=sold")
        for (const reader of [all, sold]) yield* next(reader)
        const poll = yield* Effect.fork(Effect.flatMap(
          app.fetch("/v1/pets/changes?status=sold&wait=10", { headers: { authorization: `Bearer ${app.key}` } }),
          json
        ))
        yield* Effect.sleep("300 millis")
        // In one statement, one batch of the feed: a name the Pet schema refuses (blank) between two good pets.
        yield* app.sql`INSERT INTO pets (name, category_id, status)
          VALUES ('first', 1, 'sold'), (' ', 1, 'available'), ('third', 1, 'sold')`
        // The unfiltered stream ends before the pet it cannot write, its last id the pet before it.
        const ended = yield* rest(all)
        // Reconnecting meets the same pet: the client is told to wait minutes first.
        expect(ended.map((block) => block.event ?? block.retry)).toEqual(["created", 10 * 60_000, "error"])
        expect(JSON.parse(ended[0].data!).name).toBe("first")
        expect(JSON.parse(ended[2].data!)).toMatchObject({ code: "internal_error", status: 500 })
        expect(all.lastEventId()).toBe(ended[0].id)
        // One that passes over it, and the long poll, have every other pet.
        const passed = [yield* next(sold), yield* next(sold), yield* next(sold)]
        expect(passed.map((block) => block?.event)).toEqual(["created", undefined, "created"])
        expect(JSON.parse(passed[2]!.data!).name).toBe("third")
        // The long poll answers at once with what it has; from its `next`, the rest.
        const names = (page: { changes: Array<{ pet: { name: string } }> }) => page.changes.map(({ pet }) => pet.name)
        const page = yield* Fiber.join(poll)
        const more = page.changes.length === 2 ? page : yield* Effect.flatMap(
          app.fetch(`/v1/pets/changes?status=sold&wait=5&after=${page.next}`, {
            headers: { authorization: `Bearer ${app.key}` }
          }),
          json
        )
        expect([...new Set([...names(page), ...names(more)])]).toEqual(["first", "third"])
        // A stream that reads it from the table ends there too.
        const behind = yield* rest(yield* open(app, "?after=start"))
        expect(behind.map((block) => block.event ?? block.retry)).toEqual([2_000, "created", 10 * 60_000, "error"])
        yield* Effect.promise(() => sold.cancel())
      }))

    it.scopedLive("opening a stream is one request against RATE_LIMIT", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend, { RATE_LIMIT: "2/minute" })
        const reader = yield* open(app)
        expect((yield* app.fetch("/v1/pets", { headers: { authorization: `Bearer ${app.key}` } })).status).toBe(200)
        const refused = yield* app.fetch("/v1/pets/changes", streamRequest(app.key))
        expect(refused.status).toBe(429)
        expect(yield* json(refused)).toMatchObject({ code: "rate_limited" })
        yield* Effect.promise(() => reader.cancel())
      }))
  })
})

describe("the feed's limits", () => {
  it.effect("FEED_STREAMS_PER_KEY and FEED_STREAMS: 10 and 10000 unless set; a value that is no positive integer refused", () =>
    Effect.gen(function*() {
      const read = (env: Record<string, string>) =>
        Effect.withConfigProvider(FeedLimitsConfig, ConfigProvider.fromMap(new Map(Object.entries(env))))
      expect(yield* read({})).toEqual({ perKey: 10, perProcess: 10_000 })
      expect(yield* read({ FEED_STREAMS_PER_KEY: "3", FEED_STREAMS: "50" })).toEqual({ perKey: 3, perProcess: 50 })
      for (const value of ["0", "-1", "2.5", "many"]) {
        const refused = yield* Effect.flip(read({ FEED_STREAMS: value }))
        expect(String(refused)).toContain(
          `FEED_STREAMS must be a positive integer, the event streams this process serves at once, such as 10000 (got ${
            JSON.stringify(value)
          })`
        )
      }
    }))
})

describePostgres((backend) => {
  it.scopedLive("a key revoked through one replica ends its streams on another within a second", () =>
    Effect.gen(function*() {
      const a = yield* appWith(backend)
      const b = yield* appOn(a.url)
      const key = yield* a.newKey("revoked")
      const reader = yield* open(b, "", {}, key)
      yield* next(reader)
      const started = Date.now()
      yield* Context.get(a.context, ApiKeys).revoke(Option.getOrThrow(keyIdOf(key)))
      const blocks = yield* rest(reader, 3_000)
      expect(Date.now() - started).toBeLessThan(1_500)
      expect(JSON.parse(blocks.at(-1)!.data!)).toMatchObject({ code: "unauthorized", status: 401 })
    }))
})
