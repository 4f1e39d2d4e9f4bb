/**
 * An event stream as a reconnecting client holds it, for the system tests and the feed bench: opened over `fetch` with
 * `Accept: text/event-stream` (and `Last-Event-ID` when resuming), read to its end block by block with the tests'
 * reader (test/support/sse.ts), its last event id kept, cut when the client goes away, and how it ended told apart.
 */
import { type Block, readEvents } from "../../support/sse.js"

export type { Block }

/** How a stream ended: the server closed it, this side cut it, or the connection failed (the error). */
export type SseEnd =
  | { readonly _tag: "Closed" }
  | { readonly _tag: "Cut" }
  | { readonly _tag: "Failed"; readonly error: unknown }

export interface SseStream {
  readonly response: Response
  /**
   * Reads the stream to its end, giving each block to `onBlock` as it comes (an answer other than a 200 event stream
   * is not read: Closed at once). Never rejects.
   */
  readonly read: (onBlock: (block: Block) => void) => Promise<SseEnd>
  /** The id of the last block that had one, or the id the stream was opened with while none has. */
  readonly lastEventId: () => string | undefined
  /** Cuts the stream (as a client that goes away): `read` ends with Cut. */
  readonly cut: () => void
}

/** Whether an answer is an event stream (Content-Type `text/event-stream`, parameters allowed). */
export const isEventStream = (response: Response) =>
  /^text\/event-stream\s*(;|$)/i.test(response.headers.get("content-type") ?? "")

/** A read waits this long for a block: a stream is read until it ends or is cut, however quiet. */
const FOREVER_MILLIS = 24 * 3_600_000

/**
 * Opens an event stream: GET with `Accept: text/event-stream`, the headers given, and `Last-Event-ID` when given.
 * Rejects when no answer comes (the connection refused or reset before the head).
 */
export const openSse = async (
  url: string,
  options: { readonly headers?: Record<string, string>; readonly lastEventId?: string | undefined } = {}
): Promise<SseStream> => {
  const controller = new AbortController()
  let cut = false
  let last = options.lastEventId
  const response = await fetch(url, {
    headers: {
      accept: "text/event-stream",
      ...options.headers,
      ...(options.lastEventId === undefined ? {} : { "last-event-id": options.lastEventId })
    },
    signal: controller.signal
  })
  const read = async (onBlock: (block: Block) => void): Promise<SseEnd> => {
    if (response.status !== 200 || !isEventStream(response) || response.body === null) {
      await response.arrayBuffer().catch(() => undefined)
      return { _tag: "Closed" }
    }
    const events = readEvents(response)
    try {
      for (;;) {
        const block = await events.next(FOREVER_MILLIS)
        if (block === undefined) return { _tag: "Closed" }
        last = events.lastEventId() ?? last
        onBlock(block)
      }
    } catch (error) {
      return cut ? { _tag: "Cut" } : { _tag: "Failed", error }
    }
  }
  return {
    response,
    read,
    lastEventId: () => last,
    cut: () => {
      cut = true
      controller.abort()
    }
  }
}
