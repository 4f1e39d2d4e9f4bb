/**
 * Server-Sent Events (the `text/event-stream` format of the WHATWG HTML standard, what `EventSource` reads): the
 * blocks of a stream, and responses that carry them, with the headers that keep proxies from holding them back
 * (`X-Accel-Buffering: no`) or caching them.
 *
 * A long-lived stream is a `Sink`: a response body that blocks are written to as they come, by whoever has them. Many
 * streams fed the same events is the case it is for (one write of one encoded block per stream, a few objects per
 * stream), where a `Stream` per response (`HttpServerResponse.stream`) costs a fiber and a channel per stream and per
 * element: measured with 1,000 streams, about 0.8 ms of CPU per event per stream and 0.4 MiB per idle stream
 * (`bench/results`).
 */
import { HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"

export const CONTENT_TYPE = "text/event-stream"

const HEADERS = { "cache-control": "no-store", "x-accel-buffering": "no" }

/** Whether an `Accept` header asks for an event stream. */
export const accepts = (accept: string | undefined): boolean => accept?.includes(CONTENT_TYPE) === true

/**
 * One event: an `id:` line (the client's last event id, sent back as `Last-Event-ID` when it reconnects), an `event:`
 * line (its type), and one `data:` line per line of data. An event without data is dispatched to no listener but still
 * moves the client's last event id.
 */
export const event = (fields: { readonly id?: string; readonly event?: string; readonly data?: string }): string => {
  let block = ""
  if (fields.id !== undefined) block += `id: ${fields.id}\n`
  if (fields.event !== undefined) block += `event: ${fields.event}\n`
  if (fields.data !== undefined) { for (const line of fields.data.split("\n")) block += `data: ${line}\n` }
  return `${block}\n`
}

/** A comment: ignored by the client, it keeps the connection from looking idle. */
export const comment = (text: string): string => `: ${text}\n\n`

/** How long the client waits before it reconnects after the stream ends. */
export const retry = (millis: number): string => `retry: ${Math.round(millis)}\n\n`

const encoder = new TextEncoder()
/** A block as it is written: encoded once, however many streams it is written to. */
export const encode = (block: string): Uint8Array => encoder.encode(block)

/** A stream whose blocks are all known: they are the whole body. */
export const complete = (...blocks: ReadonlyArray<string>): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.text(blocks.join(""), { contentType: CONTENT_TYPE, headers: HEADERS })

/** The body of a long-lived stream, written to as events come. */
export interface Sink {
  /**
   * How many more blocks it takes before `behind` of those written wait for the client (0 once they do, or once the
   * stream has ended): a writer writes no more than this, so that the body never holds more than `behind` blocks.
   */
  readonly room: number
  /** Writes an encoded block (nothing once the stream has ended). */
  readonly write: (block: Uint8Array) => void
  /** Waits until it has room for `blocks` (or has ended). */
  readonly roomFor: (blocks: number) => Effect.Effect<void>
  /** Whether it is full and the client has read nothing since the last time this was asked: it has stopped reading. */
  readonly stalled: () => boolean
  /** Writes `last`, if given, and ends the stream. */
  readonly end: (last?: Uint8Array) => void
  /**
   * Ends the stream at once: one with blocks its client has not read yet fails, and they are dropped (the client
   * resumes from its last id), so that a body is not held open behind blocks nobody reads. Bun's listener lets go of
   * the connection when it next writes to it: at the drain, a client whose socket is full is let go of by the listener
   * (`Lifecycle.lasting`).
   */
  readonly cut: () => void
}

/**
 * A stream's sink, and the source of its body: one object of a class per stream, with no closure of its own (an idle
 * stream's memory is mostly its heap objects, and the heap's pages grow at about twice their size: `bench/results`).
 */
class BodySink<A> implements Sink {
  controller: ReadableStreamDefaultController<Uint8Array> | undefined = undefined
  open = true
  /** Whether the client has read since `stalled` was last asked. */
  read = false
  wanted = 0
  whenRoom: (() => void) | undefined = undefined
  constructor(readonly behind: number, readonly closed: (owner: A) => void, readonly owner: A) {}

  // The body's source: the body calls these. `pull` comes after each block the client reads, while there is room.
  start(made: ReadableStreamDefaultController<Uint8Array>) {
    this.controller = made
  }
  pull() {
    this.read = true
    if (this.whenRoom !== undefined && this.room >= this.wanted) this.whenRoom()
  }
  cancel() {
    this.close()
  }

  close() {
    if (!this.open) return
    this.open = false
    this.whenRoom?.()
    this.closed(this.owner)
  }
  get room() {
    return this.open ? Math.max(0, this.controller!.desiredSize ?? 0) : 0
  }
  // A body the platform has let go of without cancelling it (its connection failed) refuses what is written: the
  // stream is over.
  write(block: Uint8Array) {
    if (!this.open) return
    try {
      this.controller!.enqueue(block)
    } catch {
      this.close()
    }
  }
  roomFor(blocks: number) {
    return Effect.async<void>((resume) => {
      if (!this.open || this.room >= blocks) return resume(Effect.void)
      this.wanted = blocks
      this.whenRoom = () => {
        this.whenRoom = undefined
        resume(Effect.void)
      }
    })
  }
  stalled() {
    const stalled = this.open && this.room === 0 && !this.read
    this.read = false
    return stalled
  }
  end(last?: Uint8Array) {
    if (!this.open) return
    try {
      if (last !== undefined) this.controller!.enqueue(last)
      this.controller!.close()
    } catch {
      // already let go of
    }
    this.close()
  }
  cut() {
    if (!this.open) return
    if (this.controller!.desiredSize === this.behind) return this.end()
    try {
      // Without a reason: Bun prints a reason as an uncaught error.
      this.controller!.error()
    } catch {
      // already let go of
    }
    this.close()
  }
}

/**
 * A stream's sink and the response that carries what is written to it. `closed(owner)` is called once, when the stream
 * ends, whichever side ends it: the client going away, or `end`. Nothing else is kept per stream.
 */
export const makeSink = <A>(behind: number, closed: (owner: A) => void, owner: A) => {
  const sink = new BodySink(behind, closed, owner)
  // Counted in blocks: a queue that counts bytes (a `size` function) costs Bun about 4 KiB more per stream.
  const body = new ReadableStream<Uint8Array>(sink, { highWaterMark: behind })
  return { sink: sink as Sink, response: HttpServerResponse.raw(body, { contentType: CONTENT_TYPE, headers: HEADERS }) }
}
