/**
 * HTTP/1.1 over raw sockets (node:net): bytes go out exactly as written, which fetch would normalise or refuse (bodies
 * on GET, bad framing, NUL bytes, undeclared methods, huge headers), and persistent connections whose number the test
 * controls.
 */
import { connect, type Socket } from "node:net"

export interface RawResponse {
  readonly status: number
  /** Header names in lower case; repeated headers joined with ", ". */
  readonly headers: Readonly<Record<string, string>>
  readonly body: Buffer
  readonly text: string
  /** The body parsed as JSON, when it is JSON. */
  readonly json: any
}

/** A complete response at the start of `data`, and how many bytes it took; undefined while more bytes are needed. */
const parseResponse = (data: Buffer, options: { readonly head: boolean; readonly closed: boolean }) => {
  const end = data.indexOf("\r\n\r\n")
  if (end < 0) return undefined
  const [statusLine, ...lines] = data.subarray(0, end).toString("latin1").split("\r\n")
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1])
  if (!Number.isInteger(status)) throw new Error(`not an HTTP response: ${JSON.stringify(statusLine)}`)
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(":")
    const name = line.slice(0, colon).trim().toLowerCase()
    const value = line.slice(colon + 1).trim()
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`
  }
  let start = end + 4
  let body: Buffer
  let consumed: number
  if (options.head || status === 204 || status === 304 || (status >= 100 && status < 200)) {
    body = Buffer.alloc(0)
    consumed = start
  } else if (headers["transfer-encoding"]?.toLowerCase().includes("chunked")) {
    const chunks: Array<Buffer> = []
    for (;;) {
      const lineEnd = data.indexOf("\r\n", start)
      if (lineEnd < 0) return undefined
      const size = parseInt(data.subarray(start, lineEnd).toString("latin1"), 16)
      if (data.length < lineEnd + 2 + size + 2) return undefined
      if (size === 0) {
        consumed = data.indexOf("\r\n\r\n", lineEnd) + 4 // no trailers are expected
        if (consumed < 4) return undefined
        break
      }
      chunks.push(data.subarray(lineEnd + 2, lineEnd + 2 + size))
      start = lineEnd + 2 + size + 2
    }
    body = Buffer.concat(chunks)
  } else if (headers["content-length"] !== undefined) {
    const length = Number(headers["content-length"])
    if (data.length < start + length) return undefined
    body = data.subarray(start, start + length)
    consumed = start + length
  } else {
    if (!options.closed) return undefined // the body runs to the end of the connection
    body = data.subarray(start)
    consumed = data.length
  }
  const text = body.toString("utf8")
  let json: any
  try {
    json = text.length > 0 ? JSON.parse(text) : undefined
  } catch {
    json = undefined
  }
  return { response: { status, headers, body, text, json } as RawResponse, consumed }
}

export type Outcome =
  | { readonly kind: "response"; readonly response: RawResponse }
  /** The server closed the connection without a complete response. */
  | { readonly kind: "closed"; readonly received: Buffer }
  /** Nothing complete came within the time allowed. */
  | { readonly kind: "timeout"; readonly received: Buffer }

/**
 * Writes `bytes` on a new connection (then ends the writing side unless `keepWriting`), and reads one response.
 * The connection is destroyed afterwards.
 */
export const exchange = (
  port: number,
  bytes: Buffer | string,
  options: { readonly head?: boolean; readonly timeoutMs?: number; readonly keepWriting?: boolean } = {}
) =>
  new Promise<Outcome>((done) => {
    const socket = connect(port, "127.0.0.1")
    let data = Buffer.alloc(0)
    let settled = false
    const settle = (outcome: Outcome) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      done(outcome)
    }
    const timer = setTimeout(() => settle({ kind: "timeout", received: data }), options.timeoutMs ?? 10_000)
    const attempt = (closed: boolean) => {
      try {
        const parsed = parseResponse(data, { head: options.head ?? false, closed })
        if (parsed !== undefined) settle({ kind: "response", response: parsed.response })
        else if (closed) settle({ kind: "closed", received: data })
      } catch {
        settle({ kind: "closed", received: data })
      }
    }
    socket.on("data", (chunk: Buffer) => {
      data = Buffer.concat([data, chunk])
      attempt(false)
    })
    socket.on("error", () => attempt(true))
    socket.on("close", () => attempt(true))
    socket.on("connect", () => {
      // A server that answers before it has read everything may reset the connection: the answer is what counts.
      socket.write(bytes, () => {
        if (!options.keepWriting) socket.end()
      })
    })
  })

/** Bytes of a request: the request line, the headers as given (nothing added), and the body. */
export const requestBytes = (
  line: string,
  headers: ReadonlyArray<readonly [string, string]>,
  body: Buffer | string = ""
) =>
  Buffer.concat([
    Buffer.from(`${line}\r\n${headers.map(([name, value]) => `${name}: ${value}\r\n`).join("")}\r\n`, "latin1"),
    typeof body === "string" ? Buffer.from(body, "utf8") : body
  ])

/** A persistent HTTP/1.1 connection that sends one request at a time and reads its response. */
export class Connection {
  private data = Buffer.alloc(0)
  private waiting: {
    readonly head: boolean
    readonly done: (r: RawResponse) => void
    readonly fail: (e: Error) => void
  } | undefined
  private closed = false

  private constructor(private readonly socket: Socket) {
    socket.setNoDelay(true)
    socket.on("data", (chunk: Buffer) => {
      this.data = Buffer.concat([this.data, chunk])
      this.drain()
    })
    const close = (error?: Error) => {
      this.closed = true
      this.waiting?.fail(error ?? new Error("the connection closed"))
      this.waiting = undefined
    }
    socket.on("error", close)
    socket.on("close", () => close())
  }

  static open(port: number) {
    return new Promise<Connection>((done, fail) => {
      const socket = connect(port, "127.0.0.1")
      socket.once("connect", () => done(new Connection(socket)))
      socket.once("error", fail)
    })
  }

  private drain() {
    if (this.waiting === undefined) return
    const parsed = parseResponse(this.data, { head: this.waiting.head, closed: false })
    if (parsed === undefined) return
    this.data = this.data.subarray(parsed.consumed)
    const { done } = this.waiting
    this.waiting = undefined
    done(parsed.response)
  }

  request(method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<RawResponse> {
    if (this.waiting !== undefined) throw new Error("one request at a time on a connection")
    if (this.closed) return Promise.reject(new Error("the connection is closed"))
    const all: Array<[string, string]> = [["host", "127.0.0.1"], ...Object.entries(headers)]
    if (body !== undefined) all.push(["content-length", String(Buffer.byteLength(body))])
    return new Promise((done, fail) => {
      this.waiting = { head: method === "HEAD", done, fail }
      this.socket.write(requestBytes(`${method} ${path} HTTP/1.1`, all, body))
      this.drain()
    })
  }

  close() {
    this.socket.destroy()
  }
}
