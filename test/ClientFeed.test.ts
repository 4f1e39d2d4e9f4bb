/**
 * The typed client's `changes` (`src/ClientFeed.ts`) against the application in-process, on SQLite and PostgreSQL:
 * the pets added before and after it starts arrive once, in order; `start` replays; a status filter; polls that fail
 * in transit or are answered 502, 503 or 429 are sent again from the same position, and nothing is lost or repeated;
 * and the stream ends only on what retrying cannot mend (401, 410, 400, a body the schemas refuse, an undeclared
 * answer), after one request. Real time throughout: the long polls wait a second, the retries back off.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Option, Queue, Stream, TestClock } from "effect"
import { type Change, type ChangesOptions, makeClient, type PetStatus } from "../src/Client.js"
import { type Backend, describeBackends } from "./support/backends.js"
import { answeredBy, type Fetch, ORIGIN, testServer } from "./support/http.js"

/** What the network does to one poll: pass it on, or fail it in one of the ways a retry mends. */
type Fault = "pass" | "503" | "502" | "429" | "drop" | "lost"

const errorAnswer = (status: number, code: string, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify({ code, message: `answered ${status}`, status }), {
    status,
    headers: { "content-type": "application/json", ...headers }
  })

/**
 * `fetch`, with each poll of the feed taking the next fault of `script` (then passing): the `after` of every poll sent
 * is recorded, with what became of it.
 */
const faulty = (fetch: Fetch, script: Array<Fault>) => {
  const polls: Array<{ readonly after: string | null; readonly wait: string | null; readonly fault: Fault }> = []
  const wrapped: Fetch = async (path, init) => {
    if (!path.startsWith("/v1/pets/changes")) return fetch(path, init)
    const fault = script.shift() ?? "pass"
    const { searchParams } = new URL(path, ORIGIN)
    polls.push({ after: searchParams.get("after"), wait: searchParams.get("wait"), fault })
    switch (fault) {
      case "pass":
        return fetch(path, init)
      case "503":
        return errorAnswer(503, "unavailable")
      case "502":
        return new Response("<html>Bad Gateway</html>", { status: 502, headers: { "content-type": "text/html" } })
      case "429":
        return errorAnswer(429, "rate_limited", { "retry-after": "1" })
      case "drop":
        throw new TypeError("fetch failed: connection refused")
      case "lost":
        // The service answered; the answer never arrived.
        await (await fetch(path, init)).arrayBuffer()
        throw new TypeError("fetch failed: connection reset")
    }
  }
  return { fetch: wrapped, polls }
}

/** Lets the requests that fibers started reach the stand-in, or come back (real time: the test clock does not move). */
const settle = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))

const clientOf = (fetch: Fetch, apiKey: string) =>
  makeClient({ baseUrl: `${ORIGIN}/v1`, apiKey }).pipe(answeredBy(fetch))

const petsOf = (changes: Iterable<Change>) => [...changes].map((change) => change.pet)

/** The order of positions of the one feed: `<feed id>.<n>`, by n. */
const ordinal = (change: Change) => Number(change.position.split(".")[1])

describeBackends((backend: Backend) => {
  const setUp = (script: Array<Fault> = []) =>
    Effect.gen(function*() {
      const server = yield* testServer(backend)
      const network = faulty(server.fetch, script)
      const client = yield* clientOf(network.fetch, server.key)
      const create = (name: string, status: PetStatus = "available") =>
        client.createPet({ name, categoryId: 1, status })
      /** Follows the feed for as long as the test's scope; `take(n)` waits for the next n changes, or its failure. */
      const follow = (options: ChangesOptions) =>
        Effect.map(
          Stream.toQueueOfElements(client.changes(options)),
          (received) => (n: number) =>
            Effect.forEach(Array.from({ length: n }), () => Effect.flatten(Queue.take(received)))
        )
      return { server, network, client, create, follow }
    })

  /**
   * Two pets created before following from `after`, two after, then a fifth: each arrives once, in order (nothing
   * repeated in between: the next one is the next pet).
   */
  const fivePets = (
    create: Effect.Effect.Success<ReturnType<typeof setUp>>["create"],
    follow: Effect.Effect.Success<ReturnType<typeof setUp>>["follow"],
    after: string
  ) =>
    Effect.gen(function*() {
      const before = [yield* create("a"), yield* create("b", "sold")]
      const take = yield* follow({ after, wait: 1 })
      const first = yield* take(2)
      expect(petsOf(first)).toEqual(before)
      const later = [yield* create("c"), yield* create("d")]
      const second = yield* take(2)
      expect(petsOf(second)).toEqual(later)
      const e = yield* create("e")
      const [third] = yield* take(1)
      expect(third.pet).toEqual(e)
      return { e, first, second, third }
    })

  describe("the client's changes", () => {
    it.scopedLive("the pets added before and after it starts arrive once, in order, each with its position", () =>
      Effect.gen(function*() {
        const { client, create, follow } = yield* setUp()
        yield* create("listed")
        const { position } = yield* client.listPets()
        const { e, first, second, third } = yield* fivePets(create, follow, Option.getOrThrow(position))
        const all = [...first, ...second, third]
        for (let i = 1; i < all.length; i++) expect(ordinal(all[i])).toBeGreaterThan(ordinal(all[i - 1]))
        // A change's position resumes right after it.
        const resumed = yield* Stream.runCollect(
          client.changes({ after: second[1].position, wait: 1 }).pipe(Stream.take(1))
        )
        expect(petsOf(resumed)).toEqual([e])
      }))

    it.scopedLive("`start` replays the catalogue, then follows on", () =>
      Effect.gen(function*() {
        const { create, follow } = yield* setUp()
        const pets = [yield* create("a"), yield* create("b"), yield* create("c")]
        const take = yield* follow({ after: "start", wait: 1 })
        expect(petsOf(yield* take(3))).toEqual(pets)
        const d = yield* create("d")
        expect(petsOf(yield* take(1))).toEqual([d])
      }))

    it.scopedLive("a status filter: only the pets with that status, before and after it starts", () =>
      Effect.gen(function*() {
        const { create, follow } = yield* setUp()
        const b = (yield* Effect.forEach(
          [["a", "available"], ["b", "sold"], ["c", "pending"]] as const,
          ([name, status]) => create(name, status)
        ))[1]
        const take = yield* follow({ after: "start", status: "sold", wait: 1 })
        expect(petsOf(yield* take(1))).toEqual([b])
        yield* create("d", "pending")
        const e = yield* create("e", "sold")
        expect(petsOf(yield* take(1))).toEqual([e])
      }))

    it.scopedLive("polls failed in transit, or answered 503, 502 or 429, are sent again from the same position", () =>
      Effect.gen(function*() {
        const script: Array<Fault> = ["503", "drop", "pass", "lost", "502", "pass", "429", "pass"]
        const faults = script.filter((fault) => fault !== "pass").length
        const { create, follow, network } = yield* setUp(script)
        // Each pet once, in order, though every fault of the script was met on the way.
        yield* fivePets(create, follow, "start")
        expect(script).toEqual([])
        const { polls } = network
        expect(polls.filter((poll) => poll.fault !== "pass")).toHaveLength(faults)
        // After a fault, the same position again; the position moves only with a page received.
        polls.forEach((poll, i) => {
          if (poll.fault !== "pass") expect(polls[i + 1].after, `after poll ${i} (${poll.fault})`).toBe(poll.after)
        })
        expect(polls[0].after).toBe("start")
      }))

    it.scopedLive("`now` is resolved by a poll that does not wait: a first answer lost skips no pet a later poll waits for", () =>
      Effect.gen(function*() {
        const { create, follow, network } = yield* setUp(["lost"])
        const take = yield* follow({ wait: 1 })
        // Once a poll that waits has reached the service, a pet is created: the answer it is in must not be lost.
        while (!network.polls.some((poll) => poll.wait !== "0")) yield* settle
        yield* settle
        const a = yield* create("a")
        const b = yield* create("b")
        // Only `b` comes once `a` is skipped: the take is bounded, to fail rather than hang.
        expect(petsOf(yield* take(2).pipe(Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => "only one" }))))
          .toEqual([a, b])
        const { polls } = network
        expect(polls[0]).toEqual({ after: "now", wait: "0", fault: "lost" })
        // `now` was sent only by polls that answer at once; every poll that waits was sent from a position.
        for (const poll of polls) if (poll.after === "now") expect(poll.wait).toBe("0")
        expect(polls.filter((poll) => poll.wait === "1").every((poll) => poll.after !== "now")).toBe(true)
      }))

    it.scopedLive("ends with FeedPositionGone for a position of another feed, or none, without retrying", () =>
      Effect.gen(function*() {
        const { client, create, network } = yield* setUp()
        yield* create("a")
        for (const after of ["0123456789abcdef.1", "not-a-position"]) {
          const error = yield* Effect.flip(Stream.runDrain(client.changes({ after, wait: 1 })))
          expect(error._tag, after).toBe("FeedPositionGone")
        }
        expect(network.polls).toHaveLength(2)
      }))

    it.scopedLive("ends with Unauthorized for a key the service does not know, without retrying", () =>
      Effect.gen(function*() {
        const { network } = yield* setUp()
        const stranger = yield* clientOf(network.fetch, "psk_000000000000_not-a-key")
        const error = yield* Effect.flip(Stream.runDrain(stranger.changes({ wait: 1 })))
        expect(error._tag).toBe("Unauthorized")
        expect(network.polls).toHaveLength(1)
      }))
  })
})

describe("the client's changes, answered by a stand-in", () => {
  /** A client whose polls `answer` answers, and the number of polls it sent. */
  const standIn = (answer: () => Response) =>
    Effect.gen(function*() {
      let polls = 0
      const client = yield* clientOf(async () => {
        polls++
        return answer()
      }, "psk_000000000000_any")
      return { client, polls: () => polls }
    })

  it.effect("end on a 400, a body the schemas refuse and an undeclared answer, after one poll; a bad wait before any", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [string, () => Response]> = [
        ["BadRequest", () => errorAnswer(400, "invalid_query")],
        ["ParseError", () => Response.json({ changes: [{ position: "x.1" }], next: "x.1" })],
        ["ResponseError", () => new Response("Not Found", { status: 404 })]
      ]
      for (const [tag, answer] of cases) {
        const { client, polls } = yield* standIn(answer)
        const error = yield* Effect.flip(Stream.runDrain(client.changes()))
        expect(error._tag, tag).toBe(tag)
        expect(polls(), tag).toBe(1)
      }
      const { client, polls } = yield* standIn(() => Response.json({ changes: [], next: "x.1" }))
      expect((yield* Effect.flip(Stream.runDrain(client.changes({ wait: 99 }))))._tag).toBe("ParseError")
      expect(polls()).toBe(0)
    }))

  it.scoped("waits for a 429's Retry-After, longer than its backoff, before the same poll again", () =>
    Effect.gen(function*() {
      const sent: Array<string | null> = []
      const client = yield* clientOf((path, init) => {
        sent.push(new URL(path, ORIGIN).searchParams.get("after"))
        // Then a poll that waits until it is cancelled.
        return sent.length === 1
          ? Promise.resolve(errorAnswer(429, "rate_limited", { "retry-after": "5" }))
          : new Promise((_, reject) => init?.signal?.addEventListener("abort", () => reject(init.signal!.reason)))
      }, "psk_000000000000_any")
      yield* Effect.forkScoped(Stream.runDrain(client.changes({ after: "0123456789abcdef.7" })))
      // Once the retry waits (the other sleep is the poll's own timeout, 40 s).
      while (Chunk.every(yield* TestClock.sleeps(), (wake) => wake === 40_000)) yield* settle
      expect(sent).toHaveLength(1)
      // Past any backoff of a first retry, not yet at the Retry-After.
      yield* TestClock.adjust("4 seconds")
      yield* settle
      expect(sent).toHaveLength(1)
      yield* TestClock.adjust("1 second")
      while (sent.length < 2) yield* settle
      expect(sent).toEqual(["0123456789abcdef.7", "0123456789abcdef.7"])
    }))
})
