/**
 * A small Server-Sent Events reader over `fetch`, for the system tests and the feed bench: the stream parsed as the
 * HTML standard's event-stream format (lines ending in CRLF, LF or CR; `field: value` with one leading space dropped;
 * `:` comments; a blank line ends a block), with every block surfaced as written — id-only blocks and comment-only
 * blocks included, which an EventSource would not dispatch — and the last event id tracked as EventSource tracks it.
 */

/** One block of the stream: the fields up to a blank line. */
export interface SseBlock {
  /** The value of the block's last `id:` line, when it had one. */
  readonly id?: string
  readonly event?: string
  /** The `data:` lines, joined with "\n"; undefined when the block had none. */
  readonly data?: string
  /** The value of a `retry:` line made of digits only. */
  readonly retry?: number
  /** The comment lines (after the colon and one space). */
  readonly comments: ReadonlyArray<string>
}

/** An incremental parser: text in, the blocks it completes out; the last event id as a reconnecting client sends it. */
export class SseParser {
  private buffer = ""
  private started = false
  private lines: Array<string> = []
  /** The last event id: set by each completed block that carries an `id:` line (an empty one clears it). */
  lastEventId: string | undefined = undefined

  push(text: string): Array<SseBlock> {
    if (!this.started && text !== "") {
      this.started = true
      if (text.startsWith("\uFEFF")) text = text.slice(1)
    }
    this.buffer += text
    const blocks: Array<SseBlock> = []
    for (;;) {
      const at = this.buffer.search(/[\r\n]/)
      if (at === -1) break
      // A CR at the very end may be the first half of a CRLF still to come.
      if (this.buffer[at] === "\r" && at === this.buffer.length - 1) break
      const line = this.buffer.slice(0, at)
      this.buffer = this.buffer.slice(this.buffer[at] === "\r" && this.buffer[at + 1] === "\n" ? at + 2 : at + 1)
      if (line === "") {
        const block = this.complete()
        if (block !== undefined) blocks.push(block)
      } else {
        this.lines.push(line)
      }
    }
    return blocks
  }

  /** The block the blank line closes; none for a blank line alone. */
  private complete(): SseBlock | undefined {
    if (this.lines.length === 0) return undefined
    let id: string | undefined
    let event: string | undefined
    let data: Array<string> | undefined
    let retry: number | undefined
    const comments: Array<string> = []
    for (const line of this.lines) {
      if (line.startsWith(":")) {
        comments.push(line.slice(line.startsWith(": ") ? 2 : 1))
        continue
      }
      const colon = line.indexOf(":")
      const field = colon === -1 ? line : line.slice(0, colon)
      const rest = colon === -1 ? "" : line.slice(colon + 1)
      const value = rest.startsWith(" ") ? rest.slice(1) : rest
      if (field === "id" && !value.includes("\0")) id = value
      else if (field === "event") event = value
      else if (field === "data") (data ??= []).push(value)
      else if (field === "retry" && /^[0-9]+$/.test(value)) retry = Number(value)
    }
    this.lines = []
    if (id !== undefined) this.lastEventId = id === "" ? undefined : id
    return {
      ...(id === undefined ? {} : { id }),
      ...(event === undefined ? {} : { event }),
      ...(data === undefined ? {} : { data: data.join("\n") }),
      ...(retry === undefined ? {} : { retry }),
      comments
    }
  }
}

/** How a stream ended: the server closed it, this side cut it, or the connection failed (the error). */
export type SseEnd =
  | { readonly _tag: "Closed" }
  | { readonly _tag: "Cut" }
  | { readonly _tag: "Failed"; readonly error: unknown }

export interface SseStream {
  readonly response: Response
  /**
   * Reads the stream to its end, giving each block to `onBlock` as it completes (an answer other than a 200 event
   * stream is not read: Closed at once). Never rejects.
   */
  readonly read: (onBlock: (block: SseBlock) => void) => Promise<SseEnd>
  /** The last event id of this stream, or the one it was opened with when no block has set one. */
  readonly lastEventId: () => string | undefined
  /** Cuts the stream (as a client that goes away): `read` ends with Cut. */
  readonly cut: () => void
}

/** Whether an answer is an event stream (Content-Type `text/event-stream`, parameters allowed). */
export const isEventStream = (response: Response) =>
  /^text\/event-stream\s*(;|$)/i.test(response.headers.get("content-type") ?? "")

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
  const response = await fetch(url, {
    headers: {
      accept: "text/event-stream",
      ...options.headers,
      ...(options.lastEventId === undefined ? {} : { "last-event-id": options.lastEventId })
    },
    signal: controller.signal
  })
  const parser = new SseParser()
  parser.lastEventId = options.lastEventId
  const read = async (onBlock: (block: SseBlock) => void): Promise<SseEnd> => {
    if (response.status !== 200 || !isEventStream(response) || response.body === null) {
      await response.arrayBuffer().catch(() => undefined)
      return { _tag: "Closed" }
    }
    const reader = response.body.getReader()
    const decoder = new TextDecoder()
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) {
          for (const block of parser.push(decoder.decode())) onBlock(block)
          return { _tag: "Closed" }
        }
        for (const block of parser.push(decoder.decode(value, { stream: true }))) onBlock(block)
      }
    } catch (error) {
      return cut ? { _tag: "Cut" } : { _tag: "Failed", error }
    }
  }
  return {
    response,
    read,
    lastEventId: () => parser.lastEventId,
    cut: () => {
      cut = true
      controller.abort()
    }
  }
}
