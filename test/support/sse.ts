/**
 * A reader of Server-Sent Events over a fetch `Response`, as `EventSource` parses them (WHATWG HTML §9.2.6): `id:`,
 * `event:`, `data:` (joined with newlines), `retry:`, comments; a block ends at a blank line. Each block is handed
 * over as it is, an id-only block and a comment included, so that a test sees everything the server wrote.
 */

export interface Block {
  readonly id?: string
  readonly event?: string
  readonly data?: string
  readonly retry?: number
  readonly comment?: string
}

/** A stream's blocks, one at a time: `next` resolves with the next one, or `undefined` once the stream has ended. */
export interface EventReader {
  readonly next: (timeoutMillis?: number) => Promise<Block | undefined>
  /** The id of the last block that had one: what a reconnecting client sends as `Last-Event-ID`. */
  readonly lastEventId: () => string | undefined
  readonly cancel: () => Promise<void>
  /**
   * Settles once the server has let go of the body (it ended with nothing left to read, or failed): what a client that
   * has stopped reading still notices, as its connection closing (at once for a body of known length). A stream
   * ended behind blocks nobody reads stays open.
   */
  readonly closed: Promise<void>
}

/** Parses one block's lines. */
export const parseBlock = (text: string): Block => {
  const block: { id?: string; event?: string; data?: Array<string>; retry?: number; comment?: string } = {}
  for (const line of text.split("\n")) {
    if (line.startsWith(":")) {
      block.comment = line.slice(1).trim()
      continue
    }
    const colon = line.indexOf(":")
    const field = colon === -1 ? line : line.slice(0, colon)
    const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "")
    if (field === "id") block.id = value
    else if (field === "event") block.event = value
    else if (field === "data") (block.data ??= []).push(value)
    else if (field === "retry") block.retry = Number(value)
  }
  const { data, ...rest } = block
  return data === undefined ? rest : { ...rest, data: data.join("\n") }
}

export const readEvents = (response: Response): EventReader => {
  // The body itself, not piped through a decoder: a pipe holds a failed body's last blocks until they are read.
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let buffer = ""
  let last: string | undefined
  let ended = false
  let pending: ReturnType<typeof reader.read> | undefined
  const next = async (timeoutMillis = 10_000): Promise<Block | undefined> => {
    const deadline = Date.now() + timeoutMillis
    while (true) {
      const end = buffer.indexOf("\n\n")
      if (end !== -1) {
        const block = parseBlock(buffer.slice(0, end))
        buffer = buffer.slice(end + 2)
        if (block.id !== undefined) last = block.id
        return block
      }
      if (ended) return undefined
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`no event within ${timeoutMillis} ms`)
      let timer: ReturnType<typeof setTimeout> | undefined
      // A read that outlives a timeout is kept for the next call: what it brings is not lost.
      pending ??= reader.read()
      const read = await Promise.race([
        pending,
        new Promise<"timeout">((resolve) => timer = setTimeout(() => resolve("timeout"), left))
      ]).finally(() => clearTimeout(timer))
      if (read === "timeout") throw new Error(`no event within ${timeoutMillis} ms`)
      pending = undefined
      if (read.done) {
        ended = true
        buffer += decoder.decode()
      } else buffer += decoder.decode(read.value, { stream: true })
    }
  }
  // A body of known length is handed over whole: its server holds nothing of it, read or not.
  const closed = response.headers.has("content-length") ? Promise.resolve() : reader.closed.then(() => {}, () => {})
  return { next, lastEventId: () => last, cancel: () => reader.cancel(), closed }
}
