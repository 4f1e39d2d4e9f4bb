/**
 * A TCP proxy in front of the test database, which a test can cut off to play an outage:
 *
 * - `refuse`: every connection is closed and new ones are refused (a database that is down);
 * - `blackhole`: connections are accepted but nothing goes through, in either direction (a network that has gone
 *   silent); what was sent is held, and delivered once the proxy opens again, as TCP would after the partition;
 * - `open`: traffic flows.
 */
import { Effect, type Scope } from "effect"
import { connect, createServer, type Server, type Socket } from "node:net"

export type Mode = "open" | "refuse" | "blackhole"

export interface Proxy {
  /** The port it listens on, on 127.0.0.1. */
  readonly port: number
  readonly set: (mode: Mode) => Effect.Effect<void>
}

interface Link {
  readonly client: Socket
  upstream: Socket | undefined
  readonly toUpstream: Array<string | Uint8Array>
  readonly toClient: Array<string | Uint8Array>
}

export const makeProxy = (target: { readonly host: string; readonly port: number }) =>
  Effect.gen(function*() {
    let mode: Mode = "open"
    const links = new Set<Link>()

    const flush = (link: Link) => {
      if (mode !== "open") return
      if (link.upstream === undefined) {
        const upstream = connect(target.port, target.host)
        link.upstream = upstream
        upstream.on("data", (chunk) => {
          link.toClient.push(chunk)
          flush(link)
        })
        upstream.on("error", () => link.client.destroy())
        upstream.on("close", () => link.client.destroy())
      }
      for (const chunk of link.toUpstream.splice(0)) link.upstream.write(chunk)
      for (const chunk of link.toClient.splice(0)) link.client.write(chunk)
    }

    const accept = (client: Socket) => {
      const link: Link = { client, upstream: undefined, toUpstream: [], toClient: [] }
      links.add(link)
      client.on("data", (chunk) => {
        link.toUpstream.push(chunk)
        flush(link)
      })
      client.on("error", () => link.upstream?.destroy())
      client.on("close", () => {
        link.upstream?.destroy()
        links.delete(link)
      })
      flush(link)
    }

    let server: Server | undefined
    const listen = (port: number) =>
      Effect.async<number>((resume) => {
        const listening = createServer(accept)
        server = listening
        listening.once("error", (error) => resume(Effect.die(error)))
        listening.listen(
          port,
          "127.0.0.1",
          () => resume(Effect.succeed((listening.address() as { port: number }).port))
        )
      })
    const close = Effect.async<void>((resume) => {
      const closing = server
      server = undefined
      for (const link of links) {
        link.client.destroy()
        link.upstream?.destroy()
      }
      links.clear()
      if (closing === undefined) resume(Effect.void)
      else closing.close(() => resume(Effect.void))
    })

    const port = yield* Effect.acquireRelease(listen(0), () => close)

    const set = (next: Mode) =>
      Effect.gen(function*() {
        const previous = mode
        mode = next
        if (next === "refuse" && previous !== "refuse") yield* close
        if (next !== "refuse" && previous === "refuse") yield* listen(port)
        if (next === "open") { for (const link of links) flush(link) }
      })

    return { port, set } satisfies Proxy
  }) satisfies Effect.Effect<Proxy, never, Scope.Scope>
