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

const now = () => performance.timeOrigin + performance.now()
const say = (line: string) => process.stdout.write(`${line}\n`)

const REQUEST = Buffer.from(
  `GET /v1/pets/changes?after=now HTTP/1.1\r\nHost: ${ORIGIN.host}\r\nAuthorization: Bearer ${KEY}\r\n` +
    "Accept: text/event-stream\r\n\r\n",
  "latin1"
)
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

const bytesOf = (text: string) => Uint8Array.from(text, (c) => c.charCodeAt(0))
/** What follows a created event's `id:` line, up to its pet id. */
const CREATED_AFTER_ID = bytesOf("event: created\ndata: {\"id\":")
const RETRY = bytesOf("retry:")
const HEARTBEAT = bytesOf(": heartbeat")
const LF = 10
const CR = 13
/** The longest block kept whole (an event's is about 150 bytes); past it, only its start is looked at. */
const BLOCK_MAX = 4096

/** Whether bytes[from, to) start with `prefix`. */
const startsWith = (bytes: Uint8Array, from: number, to: number, prefix: Uint8Array) => {
  if (to - from < prefix.length) return false
  for (let i = 0; i < prefix.length; i++) if (bytes[from + i] !== prefix[i]) return false
  return true
}

/** A created event's pet id (`id: …\nevent: created\ndata: {"id":N,`) in the block bytes[from, to), or -1. */
const createdPetId = (bytes: Uint8Array, from: number, to: number) => {
  if (to - from < 4 || bytes[from] !== 105 || bytes[from + 1] !== 100 || bytes[from + 2] !== 58) return -1 // "id:"
  let at = bytes.indexOf(LF, from)
  if (at === -1 || at >= to || !startsWith(bytes, ++at, to, CREATED_AFTER_ID)) return -1
  at += CREATED_AFTER_ID.length
  let id = 0
  const first = at
  for (; at < to && bytes[at] >= 48 && bytes[at] <= 57; at++) id = id * 10 + bytes[at] - 48
  return at > first && bytes[at] === 44 ? id : -1 // ","
}

/**
 * One stream's reading, as bytes come: the head (as text, once), then the body's chunked framing undone and its
 * blocks cut at their blank line, found with the bytes' own `indexOf`. A block that comes whole in one read is looked
 * at where it lies; one split across reads is put together in a buffer first. No string is made but for a block that
 * is neither a created event, the hint nor a heartbeat.
 */
const reader = (subscriber: number, started: () => void, failed: (why: string) => void) => {
  let head = ""
  let inHead = true
  let chunked = false
  /** Of the chunked framing: reading a chunk's size line (0), its data (1), the line end after it (2). */
  let phase = 0
  let size = 0
  let left = 0
  /** The start of a block split across reads. */
  const pending = new Uint8Array(BLOCK_MAX)
  let length = 0
  /** Whether the last byte of the body read was a line feed. */
  let afterLf = false
  const blockEnded = (bytes: Uint8Array, from: number, to: number, at: number) => {
    const petId = createdPetId(bytes, from, to)
    if (petId !== -1) arrived(subscriber, petId, at)
    else if (startsWith(bytes, from, to, RETRY)) started()
    else if (to - from !== HEARTBEAT.length || !startsWith(bytes, from, to, HEARTBEAT)) {
      note(`subscriber ${subscriber}: ${Buffer.from(bytes.subarray(from, to)).toString("latin1")}`)
    }
  }
  /** Body bytes[from, to): each blank line ends a block. */
  const data = (bytes: Uint8Array, from: number, to: number, at: number) => {
    let start = from
    let lf = bytes.indexOf(LF, from)
    while (lf !== -1 && lf < to) {
      const blank = lf > from ? bytes[lf - 1] === LF : afterLf
      if (blank) {
        if (length === 0) {
          blockEnded(bytes, start, lf - 1, at)
        } else {
          const end = Math.max(start, lf - 1)
          const room = Math.min(end - start, BLOCK_MAX - length)
          pending.set(bytes.subarray(start, start + room), length)
          // A blank line whose first line feed came in the read before.
          blockEnded(pending, 0, lf === from ? length - 1 : length + room, at)
          length = 0
        }
        start = lf + 1
      }
      lf = bytes.indexOf(LF, lf + 1)
    }
    if (start < to) {
      const room = Math.min(to - start, BLOCK_MAX - length)
      pending.set(bytes.subarray(start, start + room), length)
      length += room
    }
    // A line feed that ends the last block read does not start a blank line.
    if (to > from) afterLf = start < to && bytes[to - 1] === LF
  }
  const body = (bytes: Uint8Array, from: number, at: number) => {
    if (!chunked) return data(bytes, from, bytes.length, at)
    let i = from
    while (i < bytes.length) {
      if (phase === 0) {
        for (; i < bytes.length && bytes[i] !== LF; i++) {
          if (bytes[i] !== CR) size = size * 16 + (bytes[i] <= 57 ? bytes[i] - 48 : (bytes[i] | 32) - 87)
        }
        if (i === bytes.length) return
        i++
        if (size === 0) return // the last chunk: the server ended the stream, which `close` tells
        phase = 1
        left = size
        size = 0
      } else if (phase === 1) {
        const end = Math.min(bytes.length, i + left)
        data(bytes, i, end, at)
        left -= end - i
        i = end
        if (left === 0) phase = 2
      } else {
        const lf = bytes.indexOf(LF, i)
        if (lf === -1) return
        i = lf + 1
        phase = 0
      }
    }
  }
  return (bytes: Buffer) => {
    const at = now()
    if (!inHead) return body(bytes, 0, at)
    const before = head.length
    head += bytes.toString("latin1")
    const end = head.indexOf("\r\n\r\n")
    if (end === -1) return
    const lines = head.slice(0, end).toLowerCase()
    if (!lines.startsWith("http/1.1 200") || !/\r\ncontent-type: text\/event-stream\s*(;|\r|$)/.test(lines)) {
      return failed(`subscriber ${subscriber}: ${head.slice(0, 300)}`)
    }
    chunked = /\r\ntransfer-encoding: chunked\r?$/m.test(lines)
    inHead = false
    head = ""
    body(bytes, end + 4 - before, at)
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
try {
  for (let first = 0; first < SUBSCRIBERS; first += CONNECT_BATCH) {
    const count = Math.min(CONNECT_BATCH, SUBSCRIBERS - first)
    subscribers.push(...await Promise.all(Array.from({ length: count }, (_, i) => open(first + i))))
  }
} catch (error) {
  say(`failed ${error instanceof Error ? error.message : String(error)}`.replaceAll("\n", " "))
  process.exit(1)
}
say("ready")

for await (const line of console) {
  if (line.trim() !== "stop") continue
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
