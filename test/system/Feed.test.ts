/**
 * The change feed's Server-Sent Events (`GET /v1/pets/changes`, `Accept: text/event-stream`) under load and failure,
 * on the compiled executable: on SQLite one server, on PostgreSQL two replicas of one database. Creators add pets
 * through every server for FEED_SYSTEM_SECONDS (20 by default) while subscribers follow the feed on every server,
 * some with a `status` filter, from `after=start` or from a list's `Feed-Position`. Each subscriber's stream is cut at
 * random and opened again with `Last-Event-ID` (the first URL kept, as EventSource does), on any server; in the middle
 * one server is killed with SIGKILL and started again on the same port.
 *
 * At the end every subscriber has received, as `created` events, exactly the pets of the database after its starting
 * position that match its filter — each once, with the list's fields, at the position the database gave it — in the
 * database's commit order (SQLite: the id; PostgreSQL: the `position` column), so all in the same order; and an id for
 * every other pet (an id-only block). That includes every pet acknowledged with a 201, and any whose 201 the SIGKILL
 * lost but which committed. Nothing else is on the streams but the `retry:` hint first and heartbeats.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { join } from "node:path"
import type { Pet } from "../../src/Domain/Pet.js"
import { postgresOnly, withAdmin } from "../support/backends.js"
import { STATUSES, walk } from "./support/api.js"
import { createKey, type Petstore, scratchDirectory, startPetstore, stopAll } from "./support/petstore.js"
import { type Block, openSse, type SseStream } from "./support/sse.js"

/** How long the creators run, in seconds (the whole file stays well under two minutes with the default). */
const SECONDS = Number(process.env.FEED_SYSTEM_SECONDS ?? 20)
const CREATORS = 8
const SUBSCRIBERS = 20
/** How long a stream lives before the subscriber cuts it: from CUT_MIN to CUT_MIN + CUT_SPREAD ms. */
const CUT_MIN = 1_000
const CUT_SPREAD = 3_000
/** How long the subscribers get, once the creators stop, to reach the end of the feed. */
const CATCH_UP_MS = 20_000
const SERVER_ENV = {
  LOG_LEVEL: "warning",
  // Two keys share the subscribers: a cut stream may still count against its key for a moment after its reconnect.
  FEED_STREAMS_PER_KEY: String(SUBSCRIBERS)
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))

afterAll(stopAll)

/** One server of the run: the process serving now, replaced by another on the same port after the SIGKILL. */
interface Replica {
  server: Petstore
  readonly origin: string
  readonly database: string
}

const startReplica = async (database: string): Promise<Replica> => {
  const server = await startPetstore({ database, env: SERVER_ENV })
  return { server, origin: server.origin, database }
}

const killAndRestart = async (replica: Replica) => {
  const { signal } = await replica.server.kill("SIGKILL")
  expect(signal).toBe("SIGKILL")
  replica.server = await startPetstore({ database: replica.database, env: SERVER_ENV, port: replica.server.port })
}

/** A pet row as the database holds it after the run: its id and its feed position. */
interface Row {
  readonly id: number
  readonly position: number
}

interface Subscriber {
  readonly index: number
  readonly key: string
  readonly status: (typeof STATUSES)[number] | undefined
  /** `after` of its URL: `start`, or the Feed-Position of a list read when it joined. */
  from: string
  /** The position it follows from (0 for `start`). */
  startPosition: number
  lastEventId: string | undefined
  /** The `created` events, in the order they came. */
  readonly created: Array<{ readonly id: string; readonly pet: Pet }>
  /** The id of every block that had one, created or id-only, in the order they came. */
  readonly ids: Array<string>
  /** What the wire format does not allow: the stream's head, a block out of place, a reset or error event. */
  readonly unexpected: Array<string>
  /** Answers other than 200 before a stream started (status and body). */
  readonly refusals: Array<string>
  /** The server the stream is open on now, if one is. */
  on: Replica | undefined
  connections: number
  cuts: number
  /** Streams that ended with a network error, or that could not be opened. */
  failures: number
  /** Streams the server ended. */
  closed: number
  heartbeats: number
}

const describeBlock = (block: Block) => JSON.stringify(block).slice(0, 300)

/** The first place two sequences differ, said in a line; undefined when they are equal. */
const difference = <A>(actual: ReadonlyArray<A>, expected: ReadonlyArray<A>, show: (a: A) => string = String) => {
  const shared = Math.min(actual.length, expected.length)
  for (let i = 0; i < shared; i++) {
    if (show(actual[i]) !== show(expected[i])) {
      return `at ${i}: got ${show(actual[i])}, expected ${
        show(expected[i])
      } (${actual.length} got, ${expected.length} expected)`
    }
  }
  if (actual.length !== expected.length) {
    return `${actual.length} got, ${expected.length} expected; next: ${
      show((actual.length > expected.length ? actual : expected)[shared])
    }`
  }
  return undefined
}

/**
 * The run on `replicas` (one for SQLite, two for PostgreSQL, all on one database), then the checks. `rows` reads
 * every pet's id and position from the database, in position order, and the feed's id.
 */
const soak = async (
  replicas: ReadonlyArray<Replica>,
  keys: ReadonlyArray<string>,
  rows: () => Promise<{ readonly feed: string; readonly rows: ReadonlyArray<Row> }>
) => {
  const started = Date.now()
  const stopCreatingAt = started + SECONDS * 1_000
  const pick = () => replicas[Math.floor(Math.random() * replicas.length)]

  // --------------------------------------------------------------------------------------------- the creators
  const sent = new Map<string, { readonly categoryId: number; readonly status: string }>()
  const acknowledged = new Map<number, Pet>()
  const createRefusals: Array<string> = []
  let createFailures = 0
  const creator = async (c: number) => {
    for (let n = 0; Date.now() < stopCreatingAt; n++) {
      const replica = replicas[(c + n) % replicas.length]
      const pet = { name: `c${c}-${n}`, categoryId: 1 + (n % 5), status: STATUSES[(c * 7 + n) % 3] }
      sent.set(pet.name, pet)
      try {
        const response = await fetch(`${replica.origin}/v1/pets`, {
          method: "POST",
          headers: { authorization: `Bearer ${keys[0]}`, "content-type": "application/json" },
          body: JSON.stringify(pet),
          signal: AbortSignal.timeout(10_000)
        })
        const text = await response.text()
        if (response.status === 201) {
          const made = JSON.parse(text) as Pet
          acknowledged.set(made.id, made)
        } else {
          createRefusals.push(`${response.status} ${text.slice(0, 200)}`)
          await sleep(50)
        }
      } catch {
        // Refused or reset: the server is down (killed, or not yet started again).
        createFailures++
        await sleep(50)
      }
    }
  }

  // ------------------------------------------------------------------------------------------ the subscribers
  let following = true
  const open = new Set<SseStream>()
  const subscribers: Array<Subscriber> = Array.from({ length: SUBSCRIBERS }, (_, index) => ({
    index,
    key: keys[index % keys.length],
    // A quarter follow only available pets, a quarter only sold ones.
    status: index % 4 === 1 ? "available" : index % 4 === 3 ? "sold" : undefined,
    from: "start",
    startPosition: 0,
    lastEventId: undefined,
    created: [],
    ids: [],
    unexpected: [],
    refusals: [],
    on: undefined,
    connections: 0,
    cuts: 0,
    failures: 0,
    closed: 0,
    heartbeats: 0
  }))

  const follow = async (s: Subscriber) => {
    let replica = replicas[s.index % replicas.length]
    // Every fifth joins later, from the Feed-Position of a list read then.
    if (s.index % 5 === 4) {
      await sleep(SECONDS * 1_000 * (0.1 + Math.random() * 0.25))
      for (;;) {
        const listed = await fetch(`${replica.origin}/v1/pets?limit=1`, {
          headers: { authorization: `Bearer ${s.key}` }
        }).catch(() => undefined)
        const position = listed?.status === 200 ? listed.headers.get("feed-position") : null
        await listed?.arrayBuffer()
        if (position !== null) {
          s.from = position
          s.startPosition = Number(position.split(".")[1])
          break
        }
        replica = pick()
        await sleep(100)
      }
    }
    const query = new URLSearchParams({ after: s.from, ...(s.status === undefined ? {} : { status: s.status }) })
    const path = `/v1/pets/changes?${query}`
    while (following) {
      let stream: SseStream
      try {
        stream = await openSse(`${replica.origin}${path}`, {
          headers: { authorization: `Bearer ${s.key}` },
          lastEventId: s.lastEventId
        })
      } catch {
        s.failures++
        replica = pick()
        await sleep(100)
        continue
      }
      s.connections++
      const { response } = stream
      if (response.status !== 200) {
        s.refusals.push(`${response.status} ${(await response.text()).slice(0, 200)}`)
        replica = pick()
        await sleep(200)
        continue
      }
      const head = {
        "content-type": response.headers.get("content-type"),
        "cache-control": response.headers.get("cache-control"),
        "x-accel-buffering": response.headers.get("x-accel-buffering")
      }
      if (
        !/^text\/event-stream\b/.test(head["content-type"] ?? "") || head["cache-control"] !== "no-store" ||
        head["x-accel-buffering"] !== "no"
      ) s.unexpected.push(`the head of a stream: ${JSON.stringify(head)}`)
      s.on = replica
      open.add(stream)
      const cutting = setTimeout(stream.cut, CUT_MIN + Math.random() * CUT_SPREAD)
      let first = true
      const end = await stream.read((block) => {
        const fields = [block.id, block.event, block.data, block.retry].filter((field) => field !== undefined).length
        if (first) {
          first = false
          if (block.retry === undefined || fields !== 1) s.unexpected.push(`first block: ${describeBlock(block)}`)
          return
        }
        if (block.id !== undefined) s.lastEventId = block.id
        if (block.event === "created" && block.id !== undefined && block.data !== undefined && fields === 3) {
          s.created.push({ id: block.id, pet: JSON.parse(block.data) as Pet })
          s.ids.push(block.id)
        } else if (block.id !== undefined && fields === 1 && s.status !== undefined) {
          s.ids.push(block.id)
        } else if (fields === 0 && block.comment !== undefined) {
          s.heartbeats++
        } else {
          s.unexpected.push(`block: ${describeBlock(block)}`)
        }
      })
      clearTimeout(cutting)
      open.delete(stream)
      s.on = undefined
      s.lastEventId = stream.lastEventId()
      // A cut stream is opened again at once, on either server; one that failed or ended a moment later.
      if (end._tag === "Cut") s.cuts++
      else if (end._tag === "Failed") s.failures++
      else s.closed++
      if (end._tag !== "Cut") await sleep(50)
      replica = pick()
    }
  }

  const creators = Array.from({ length: CREATORS }, (_, c) => creator(c))
  const followers = subscribers.map(follow)

  // ---------------------------------------------------------------------------------------- the kill, mid-run
  await sleep(SECONDS * 500)
  const victim = replicas[replicas.length - 1]
  const onVictim = subscribers.filter((s) => s.on === victim).length
  await killAndRestart(victim)
  const restartedAfter = Date.now() - started - SECONDS * 500

  await Promise.all(creators)

  // ------------------------------------------------------------------------------------ the end, and the checks
  const stored = await rows()
  const endId = stored.rows.length === 0 ? undefined : `${stored.feed}.${stored.rows.at(-1)!.position}`
  const caughtUpBy = Date.now() + CATCH_UP_MS
  while (Date.now() < caughtUpBy && subscribers.some((s) => s.lastEventId !== endId)) await sleep(100)
  following = false
  for (const stream of open) stream.cut()
  await Promise.all(followers)

  const pets = new Map<number, Pet>((await walk(replicas[0].server.port, keys[0])).map((pet) => [pet.id, pet]))
  const summary = {
    seconds: (Date.now() - started) / 1_000,
    created: stored.rows.length,
    acknowledged: acknowledged.size,
    committedUnacknowledged: stored.rows.filter((row) => !acknowledged.has(row.id)).length,
    createRefusals: createRefusals.length,
    createFailures,
    subscribersOnTheKilledServer: onVictim,
    restartedAfterMs: restartedAfter,
    connections: subscribers.reduce((sum, s) => sum + s.connections, 0),
    cuts: subscribers.reduce((sum, s) => sum + s.cuts, 0),
    failures: subscribers.reduce((sum, s) => sum + s.failures, 0),
    closedByServer: subscribers.reduce((sum, s) => sum + s.closed, 0),
    heartbeats: subscribers.reduce((sum, s) => sum + s.heartbeats, 0)
  }
  console.log(JSON.stringify(summary))

  // The run did what it says: pets were created, streams were cut and resumed, the kill hit open streams.
  expect(acknowledged.size).toBeGreaterThan(0)
  expect(summary.cuts).toBeGreaterThan(SUBSCRIBERS)
  expect(onVictim).toBeGreaterThan(0)

  // The database holds every acknowledged pet as acknowledged, the list shows every pet, and nothing was not sent.
  expect(pets.size).toBe(stored.rows.length)
  for (const [id, pet] of acknowledged) expect(pets.get(id), `acknowledged pet ${id}`).toEqual(pet)
  for (const pet of pets.values()) expect(sent.get(pet.name), pet.name).toBeDefined()
  // A create is refused only while its server is not ready.
  for (const refusal of createRefusals) expect(refusal).toMatch(/^503 /)

  for (const s of subscribers) {
    const label = `subscriber ${s.index} (after=${s.from}${s.status === undefined ? "" : `, status=${s.status}`})`
    expect(s.unexpected, label).toEqual([])
    // Only a stream that could not be opened within a moment of a reconnect is refused, and only for its key's count.
    for (const refusal of s.refusals) expect(refusal, label).toMatch(/^429 .*too_many_streams/)
    const after = stored.rows.filter((row) => row.position > s.startPosition)
    const expected = after
      .map((row) => ({ id: `${stored.feed}.${row.position}`, pet: pets.get(row.id)! }))
      .filter(({ pet }) => s.status === undefined || pet.status === s.status)
    expect(difference(s.created, expected, (change) => JSON.stringify(change)), label).toBeUndefined()
    expect(difference(s.ids, after.map((row) => `${stored.feed}.${row.position}`)), label).toBeUndefined()
    if (after.length > 0) expect(s.lastEventId, label).toBe(endId)
  }
}

describe("the change feed's event streams under cuts and a SIGKILL", () => {
  it(
    "SQLite, one server killed and started again: every subscriber sees every committed pet once, in id order",
    async () => {
      const database = join(scratchDirectory(), "petstore.db")
      const keys = [createKey(database, "creators").key, createKey(database, "followers").key]
      const replica = await startReplica(database)
      await soak([replica], keys, async () => {
        const db = new Database(database)
        try {
          const feed = db.query<{ id: string }, []>("SELECT id FROM feed_meta").get()!.id
          const ids = db.query<{ id: number }, []>("SELECT id FROM pets ORDER BY id").all()
          return { feed, rows: ids.map(({ id }) => ({ id, position: id })) }
        } finally {
          db.close()
        }
      })
    },
    SECONDS * 1_000 + 60_000
  )
})

const SERVER_URL = process.env.TEST_DATABASE_URL
const pgDatabase = `feed_${randomBytes(6).toString("hex")}`
const pgUrl = (() => {
  if (SERVER_URL === undefined) return ""
  const url = new URL(SERVER_URL)
  url.pathname = `/${pgDatabase}`
  return url.href
})()

describe.skipIf(SERVER_URL === undefined)(
  postgresOnly("the change feed's event streams across two replicas under cuts and a SIGKILL"),
  () => {
    afterAll(async () => {
      await stopAll()
      await Effect.runPromise(
        withAdmin(SERVER_URL!, (sql) => sql`DROP DATABASE IF EXISTS ${sql(pgDatabase)} WITH (FORCE)`)
      )
    })

    it(
      "PostgreSQL, two replicas, one killed and started again: every subscriber sees every committed pet once, " +
        "in position order",
      async () => {
        await Effect.runPromise(withAdmin(SERVER_URL!, (sql) => sql`CREATE DATABASE ${sql(pgDatabase)}`))
        // One after the other: the first migrates.
        const a = await startReplica(pgUrl)
        const b = await startReplica(pgUrl)
        const keys = [createKey(pgUrl, "creators").key, createKey(pgUrl, "followers").key]
        await soak([a, b], keys, () =>
          Effect.runPromise(withAdmin(pgUrl, (sql) =>
            Effect.gen(function*() {
              const [{ id: feed }] = yield* sql<{ id: string }>`SELECT id FROM feed_meta`
              const rows = yield* sql<{ id: number | string; position: number | string }>`
                SELECT id, position FROM pets ORDER BY position`
              return { feed, rows: rows.map((row) => ({ id: Number(row.id), position: Number(row.position) })) }
            }))))
      },
      SECONDS * 1_000 + 90_000
    )
  }
)
