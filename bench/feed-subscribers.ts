/**
 * The subscribers of `bench/feed.ts`, in a process of their own: FEED_SUBSCRIBERS event streams of
 * `GET /v1/pets/changes?after=now` on FEED_ORIGIN, each a raw TCP connection (`Bun.connect`) with the request written by
 * hand (`Authorization: Bearer FEED_KEY`, `Accept: text/event-stream`), its answer read as bytes: the head checked (200,
 * `text/event-stream`), the chunked body undone, and each block (up to its blank line) looked at only as far as telling
 * a created event's pet id (`data: {"id":…`), the `retry:` hint, a heartbeat, or anything else. No `fetch`, no
 * `ReadableStream`, no parser: the client costs as little as the bytes allow, and the bench's creates and clock run in
 * the other process.
 *
 * Connects FEED_CONNECT_BATCH at a time, each counted once its `retry:` hint has come. Talks to its parent by lines:
 *
 * - with FEED_PAUSE_AT, it writes `paused` once that many streams are open, and opens the others on `more`;
 * - it writes `ready` once every stream is open (or `failed <why>` and exits 1), then `all <pet id>` as soon as every
 *   subscriber has a pet's event;
 * - on `stop` (its standard input) it cuts the streams, writes FEED_RESULTS (below), then `done`, and exits.
 *
 * FEED_RESULTS: a JSON line `{"subscribers", "pets", "unexpected"}` (blocks that were neither a created event, the hint
 * nor a heartbeat; an event a subscriber had already had; a stream the server ended), then per pet `1 + subscribers`
 * float64s: the pet's id, then each subscriber's arrival time (NaN: never), in milliseconds since the epoch
 * (`performance.timeOrigin + performance.now()`, the clock the parent reads too).
 */
import { writeFileSync } from "node:fs"

const ORIGIN = new URL(process.env.FEED_ORIGIN!)
const KEY = process.env.FEED_KEY!
const SUBSCRIBERS = Number(process.env.FEED_SUBSCRIBERS)
const CONNECT_BATCH = Number(process.env.FEED_CONNECT_BATCH ?? 50)
const RESULTS = process.env.FEED_RESULTS!
const PAUSE_AT = Number(process.env.FEED_PAUSE_AT ?? SUBSCRIBERS)

const now = () => performance.timeOrigin + performance.now()
const say = (line: string) => process.stdout.write(`${line}\n`)

const REQUEST = Buffer.from(
  `GET /v1/pets/changes?after=now HTTP/1.1\r\nHost: ${ORIGIN.host}\r\nAuthorization: Bearer ${KEY}\r\n` +
    "Accept: text/event-stream\r\n\r\n",
  "latin1"
)
/** A created event's pet id, read off the block's text as the server writes it (`data: {"id":…`). */
const CREATED = /^id: [^\n]*\nevent: created\ndata: \{"id":(\d+),/
const UNEXPECTED_KEPT = 10

/** By pet id: each subscriber's arrival time (NaN until it comes), and how many have come. */
const arrivals = new Map<number, { readonly times: Float64Array; count: number }>()
const unexpected: Array<string> = []
const note = (what: string) => {
  if (unexpected.length < UNEXPECTED_KEPT) unexpected.push(what.slice(0, 200))
}
let stopping = false

const arrived = (subscriber: number, petId: number, at: number) => {
  let pet = arrivals.get(petId)
  if (pet === undefined) arrivals.set(petId, pet = { times: new Float64Array(SUBSCRIBERS).fill(NaN), count: 0 })
  if (!Number.isNaN(pet.times[subscriber])) return note(`subscriber ${subscriber}: pet ${petId} a second time`)
  pet.times[subscriber] = at
  if (++pet.count === SUBSCRIBERS) say(`all ${petId}`)
}

/**
 * One stream's reading, as bytes come (decoded as latin1: one character a byte, so that the chunk sizes count
 * characters): the head, then the chunks of the body, then the blocks.
 */
const reader = (subscriber: number, started: () => void, failed: (why: string) => void) => {
  let head = ""
  let chunked = false
  let inHead = true
  /** The undecoded bytes of the body's chunked framing. */
  let framing = ""
  /** What is left of the current chunk's data (then its CRLF): -1 before a chunk's size line. */
  let left = -1
  let body = ""
  const blocks = (at: number) => {
    let start = 0
    let end = body.indexOf("\n\n")
    while (end !== -1) {
      const block = body.slice(start, end)
      const created = CREATED.exec(block)
      if (created !== null) arrived(subscriber, Number(created[1]), at)
      else if (block.startsWith("retry:")) started()
      else if (block !== ": heartbeat") note(`subscriber ${subscriber}: ${block}`)
      start = end + 2
      end = body.indexOf("\n\n", start)
    }
    body = start === 0 ? body : body.slice(start)
  }
  const unframe = (text: string) => {
    framing += text
    let at = 0
    for (;;) {
      if (left === -1) {
        const eol = framing.indexOf("\r\n", at)
        if (eol === -1) break
        const size = parseInt(framing.slice(at, eol), 16)
        at = eol + 2
        if (size === 0) break // the last chunk: the server ended the stream, which `close` tells
        left = size + 2
      }
      const take = Math.min(left, framing.length - at)
      // The chunk's data, without its closing CRLF.
      const data = Math.min(take, left - 2)
      if (data > 0) body += framing.slice(at, at + data)
      at += take
      left -= take
      if (left > 0) break
      left = -1
    }
    framing = framing.slice(at)
  }
  return (bytes: Buffer) => {
    const at = now()
    let text = bytes.toString("latin1")
    if (inHead) {
      head += text
      const end = head.indexOf("\r\n\r\n")
      if (end === -1) return
      const lines = head.slice(0, end).toLowerCase()
      if (!lines.startsWith("http/1.1 200") || !/\r\ncontent-type: text\/event-stream\s*(;|\r|$)/.test(lines)) {
        return failed(`subscriber ${subscriber}: ${head.slice(0, 300)}`)
      }
      chunked = /\r\ntransfer-encoding: chunked\r?$/m.test(lines)
      text = head.slice(end + 4)
      head = ""
      inHead = false
    }
    if (chunked) unframe(text)
    else body += text
    blocks(at)
  }
}

interface Subscriber {
  readonly socket: Bun.Socket<undefined>
}

const open = (subscriber: number): Promise<Subscriber> =>
  new Promise((resolve, reject) => {
    let ready = false
    const fail = (why: string) => {
      if (!ready) reject(new Error(why))
      ready = true
    }
    const onBytes = reader(subscriber, () => {
      if (ready) return
      ready = true
      resolve({ socket })
    }, (why) => {
      fail(why)
      socket.end()
    })
    let socket!: Bun.Socket<undefined>
    Bun.connect({
      hostname: ORIGIN.hostname,
      port: Number(ORIGIN.port),
      socket: {
        open: (made) => {
          socket = made
          made.write(REQUEST)
        },
        data: (_, bytes) => onBytes(bytes),
        close: () => {
          if (!ready) fail(`subscriber ${subscriber}: the stream ended before its retry: hint`)
          else if (!stopping) note(`subscriber ${subscriber}: the server ended the stream`)
        },
        error: (_, error) => fail(`subscriber ${subscriber}: ${String(error)}`),
        connectError: (_, error) => fail(`subscriber ${subscriber}: ${String(error)}`)
      }
    }).catch((error) => fail(`subscriber ${subscriber}: ${String(error)}`))
  })

const subscribers: Array<Subscriber> = []
/** Cuts the streams, writes FEED_RESULTS, and ends the process. */
const stop = () => {
  stopping = true
  for (const { socket } of subscribers) socket.terminate()
  const header = Buffer.from(
    JSON.stringify({ subscribers: SUBSCRIBERS, pets: arrivals.size, unexpected }) + "\n",
    "utf8"
  )
  const times = new Float64Array(arrivals.size * (1 + SUBSCRIBERS))
  let row = 0
  for (const [petId, pet] of arrivals) {
    times[row] = petId
    times.set(pet.times, row + 1)
    row += 1 + SUBSCRIBERS
  }
  writeFileSync(RESULTS, Buffer.concat([header, Buffer.from(times.buffer)]))
  say("done")
  process.exit(0)
}
let more!: () => void
const toldMore = new Promise<void>((resolve) => more = resolve)
void (async () => {
  for await (const line of console) {
    if (line.trim() === "more") more()
    else if (line.trim() === "stop") stop()
  }
})()

try {
  for (let first = 0; first < SUBSCRIBERS;) {
    if (first === PAUSE_AT) {
      say("paused")
      await toldMore
    }
    const count = Math.min(CONNECT_BATCH, (first < PAUSE_AT ? Math.min(PAUSE_AT, SUBSCRIBERS) : SUBSCRIBERS) - first)
    subscribers.push(...await Promise.all(Array.from({ length: count }, (_, i) => open(first + i))))
    first += count
  }
} catch (error) {
  say(`failed ${error instanceof Error ? error.message : String(error)}`.replaceAll("\n", " "))
  process.exit(1)
}
say("ready")
