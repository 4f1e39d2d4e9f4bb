/**
 * An event stream that starts far behind the feed's end, in process, on SQLite and PostgreSQL: a client that reads as
 * fast as it can is given every pet, however many (100,000 seeded in one statement), and only a client that stops
 * reading is ended with `slow_consumer`, the stream having held no more than a bounded number of blocks for it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { BEHIND_BLOCKS } from "../src/Pets/FeedBlocks.js"
import { type Backend, describeBackends } from "./support/backends.js"
import { type App, appWith } from "./support/retries.js"
import { type Block, parseBlock } from "./support/sse.js"

/**
 * `count` pets inserted in one statement, past those there are. On PostgreSQL their positions are given as its trigger
 * gives them, one after the other past the counter, which then stands past them: through the trigger, one row at a time
 * updating the counter's one row, a statement of 100,000 takes a minute.
 */
const seed = (app: App, count: number, backend: Backend) =>
  backend.name === "PostgreSQL"
    ? app.sql.withTransaction(Effect.gen(function*() {
      yield* app.sql`ALTER TABLE pets DISABLE TRIGGER pets_position`
      yield* app.sql`INSERT INTO pets (name, category_id, status, position)
        SELECT 'seeded ' || i, 1, 'available', c.position + i FROM feed_counter c, generate_series(1, ${count}) AS i`
      yield* app.sql`UPDATE feed_counter SET position = position + ${count}`
      yield* app.sql`ALTER TABLE pets ENABLE TRIGGER pets_position`
    }))
    : app.sql`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count})
        INSERT INTO pets (name, category_id, status) SELECT 'seeded ' || i, 1, 'available' FROM n`

const openStream = (app: App, query: string) =>
  Effect.map(
    app.fetch(`/v1/pets/changes${query}`, {
      headers: { authorization: `Bearer ${app.key}`, accept: "text/event-stream" }
    }),
    (response) => {
      expect(response.status).toBe(200)
      return response.body!.pipeThrough(new TextDecoderStream()).getReader()
    }
  )

/**
 * Reads blocks as fast as they come (heartbeats left out) until `enough` says so or the stream ends; `pause` first
 * waits this long after the first `pauseAfter` blocks, as a client that stops reading.
 */
const readBlocks = (
  reader: Effect.Effect.Success<ReturnType<typeof openStream>>,
  enough: (blocks: ReadonlyArray<Block>) => boolean,
  pause?: { readonly after: number; readonly millis: number }
) =>
  Effect.promise(async () => {
    const blocks: Array<Block> = []
    let buffer = ""
    let paused = false
    while (!enough(blocks)) {
      if (pause !== undefined && !paused && blocks.length >= pause.after) {
        paused = true
        await new Promise((resolve) => setTimeout(resolve, pause.millis))
      }
      const read = await reader.read()
      if (read.done) break
      buffer += read.value
      for (let end = buffer.indexOf("\n\n"); end !== -1; end = buffer.indexOf("\n\n")) {
        const block = parseBlock(buffer.slice(0, end))
        buffer = buffer.slice(end + 2)
        if (block.comment !== "heartbeat") blocks.push(block)
      }
    }
    return blocks
  })

const positionOf = (block: Block) => Number(block.id!.split(".")[1])

/** The positions of the created events, each one past the one before (none missed, none twice). */
const expectConsecutive = (blocks: ReadonlyArray<Block>) => {
  const positions = blocks.filter((block) => block.event === "created").map(positionOf)
  const gaps = positions.filter((position, i) => i > 0 && position !== positions[i - 1] + 1)
  expect(gaps).toEqual([])
  return positions
}

const PETS = 100_000
/** The most pets one read of the feed takes (`BATCH` in `src/Pets/Feed.ts`). */
const BATCH = 100

describeBackends((backend: Backend) => {
  describe("an event stream far behind the feed", () => {
    it.scopedLive(
      `after=start on ${PETS} pets, read as fast as it comes: every pet, no slow_consumer`,
      () =>
        Effect.gen(function*() {
          // Time for the statement that seeds them, on a busy machine.
          const app = yield* appWith(backend, { DB_QUERY_TIMEOUT: "60 seconds" })
          yield* seed(app, PETS, backend)
          const reader = yield* openStream(app, "?after=start")
          const blocks = yield* readBlocks(
            reader,
            (blocks) => blocks.length > PETS || blocks.at(-1)?.event === "error"
          )
          yield* Effect.promise(() => reader.cancel())
          expect(blocks.filter((block) => block.event !== "created" && block.retry === undefined)).toEqual([])
          const positions = expectConsecutive(blocks)
          expect(positions.length).toBe(PETS)
          expect(positions[0]).toBe(1)
        }),
      60_000
    )

    it.scopedLive(
      "a client that stops reading is ended with slow_consumer, the stream holding a bounded number of blocks",
      () =>
        Effect.gen(function*() {
          const app = yield* appWith(backend)
          // One stream follows the feed as pets come (its reads), one starts from the table (its catch-up).
          const following = yield* openStream(app, "")
          yield* readBlocks(following, (blocks) => blocks.length > 0)
          yield* seed(app, 5 * BEHIND_BLOCKS, backend)
          const behind = yield* openStream(app, "?after=start")
          // Neither client reads for two heartbeats.
          const [fromFollowing, fromBehind] = yield* Effect.all([
            readBlocks(following, () => false, { after: 0, millis: 11_000 }),
            readBlocks(behind, () => false, { after: 0, millis: 11_000 })
          ], { concurrency: 2 })
          for (const blocks of [fromFollowing, fromBehind]) {
            expect(blocks.at(-1)?.event).toBe("error")
            expect(JSON.parse(blocks.at(-1)!.data!)).toMatchObject({ code: "slow_consumer" })
            // What the stream held for the client that did not read: at most BEHIND_BLOCKS, and one read's batch.
            expect(blocks.length).toBeLessThanOrEqual(BEHIND_BLOCKS + BATCH + 2)
            // What it did deliver came in order, without a gap: resuming from the last id loses nothing.
            expectConsecutive(blocks)
          }
        }),
      30_000
    )
  })
})
