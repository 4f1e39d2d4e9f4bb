/**
 * The application's handler behind a real `Bun.serve` listener (as `Listener.ts` serves it) on a loopback port, and
 * raw bytes over a socket to it: what a client's bytes get on the wire, with nothing normalised by `fetch`.
 */
import { Effect } from "effect"
import { connect } from "node:net"
import type { Server } from "../../src/Serving/Server.js"

/** The handler served by Bun on a free loopback port for the life of the scope; its port. */
export const listening = (handler: Server) =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() =>
        Bun.serve({
          hostname: "127.0.0.1",
          port: 0,
          routes: handler.routes,
          fetch: handler,
          maxRequestBodySize: Number.MAX_SAFE_INTEGER
        })
      ),
      (server) => Effect.promise(() => server.stop(true))
    ),
    (server) => server.port!
  )

/** What came back on a connection: every byte, and whether the server closed it (rather than the wait ending). */
export interface Received {
  readonly bytes: Buffer
  readonly closedByServer: boolean
}

/** Writes `bytes` on a new connection and reads until the server closes it, or for `waitMs` at most. */
export const sendRaw = (port: number, bytes: string, waitMs = 5_000) =>
  Effect.promise(() =>
    new Promise<Received>((done) => {
      const socket = connect(port, "127.0.0.1")
      const chunks: Array<Buffer> = []
      let settled = false
      const settle = (closedByServer: boolean) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        socket.destroy()
        done({ bytes: Buffer.concat(chunks), closedByServer })
      }
      const timer = setTimeout(() => settle(false), waitMs)
      socket.on("data", (chunk: Buffer) => chunks.push(chunk))
      socket.on("close", () => settle(true))
      socket.on("error", () => settle(true))
      socket.on("connect", () => socket.write(bytes))
    })
  )

/** A response's head as sent: its status and its headers (names in lower case), and the bytes after it. */
export const parseHead = (bytes: Buffer) => {
  const end = bytes.indexOf("\r\n\r\n")
  if (end < 0) throw new Error(`no complete response head in ${JSON.stringify(bytes.toString("latin1"))}`)
  const [statusLine, ...lines] = bytes.subarray(0, end).toString("latin1").split("\r\n")
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(":")
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  return { status: Number(statusLine.split(" ")[1]), headers, rest: bytes.subarray(end + 4) }
}

/** The bytes of a request (`Connection: close` unless told otherwise by the headers given). */
export const requestText = (
  method: string,
  target: string,
  headers: Record<string, string> = {},
  body?: string
): string => {
  const all: Record<string, string> = { host: "petstore.test", connection: "close", ...headers }
  if (body !== undefined) all["content-length"] = String(Buffer.byteLength(body))
  return `${method} ${target} HTTP/1.1\r\n${
    Object.entries(all).map(([name, value]) => `${name}: ${value}\r\n`).join("")
  }\r\n${body ?? ""}`
}
