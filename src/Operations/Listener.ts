/** Bun's listener in front of the web handler, and its graceful drain. */
import { Duration, Effect, Layer, Option } from "effect"
import { lookup } from "node:dns/promises"
import { isIP } from "node:net"
import { CommandFailed } from "../CommandFailed.js"
import { isWildcardHost } from "../Config.js"
import { currentUser } from "../Database/DurableFile.js"
import type { Server } from "../Serving/Server.js"
import { WebHandler } from "../Serving/WebHandler.js"
import { idleTimeoutSeconds } from "./Deadlines.js"
import { Lifecycle } from "./Lifecycle.js"

export interface ListenOptions {
  readonly host: string
  readonly port: number
  /** How long in-flight requests may take to finish after SIGTERM/SIGINT before they are cut off. */
  readonly shutdownTimeout: Duration.Duration
  /** After SIGTERM/SIGINT, how long the listener keeps serving with readiness 503 before it stops accepting. */
  readonly shutdownDelay: Duration.Duration
  /** The request deadline (`REQUEST_TIMEOUT`): a connection's idle timeout is set past it (and a long poll's wait). */
  readonly requestTimeout: Duration.Duration
  /** Fields for the start-up log line (database, version). */
  readonly describe?: Record<string, string>
}

/**
 * While draining, every answer carries `Connection: close`, so that Bun closes a keep-alive connection once its
 * request is answered and the client opens a new one (to another replica, once the load balancer has seen readiness
 * turn 503) instead of sending its next request on a connection that is about to close.
 */
const closingWhileDraining = (handler: Server, draining: () => boolean) => {
  const close = (response: Response): Response => {
    try {
      response.headers.set("connection", "close")
    } catch {
      // immutable headers: Bun closes the connection when the listener stops
    }
    return response
  }
  const wrap = (answer: (request: Request) => Response | Promise<Response>) => (request: Request) => {
    const response = answer(request)
    if (!draining()) return response
    return response instanceof Response ? close(response) : response.then(close)
  }
  const routes = Object.fromEntries(Object.entries(handler.routes).map(([path, answer]) => [path, wrap(answer)]))
  return { routes, fetch: wrap(handler) }
}

/**
 * The first line logged after SIGTERM/SIGINT: what happens next and how long it takes, and that a second signal (a
 * second Ctrl-C) stops the process at once (the runtime stops listening for signals once the first has come).
 */
const shuttingDownLine = (options: ListenOptions): string => {
  const finish = Duration.toMillis(options.shutdownTimeout) > 0
    ? `requests in flight get up to ${Duration.format(options.shutdownTimeout)} (SHUTDOWN_TIMEOUT) to finish`
    : "requests still in flight are cut off (SHUTDOWN_TIMEOUT=0)"
  const serving = Duration.toMillis(options.shutdownDelay) > 0
    ? `still serving for ${Duration.format(options.shutdownDelay)} (SHUTDOWN_DELAY) with /readyz answering 503, then `
    : ""
  return `shutting down: ${serving}${finish}; a second Ctrl-C or signal stops at once`
}

/**
 * Why the listener could not start, in the voice of a refused setting: what `HOST` or `PORT` got and what it takes.
 * `unresolved`: the host is a name that does not resolve (Bun then reports whatever errno was left over, EINVAL or
 * even EADDRINUSE). A reason that names neither setting's fault (a port in use) is shown as the system gives it.
 */
export const listenFailure = (host: string, port: number, cause: unknown, unresolved: boolean): string => {
  const error = cause as { code?: unknown; message?: unknown } | undefined
  const head = `Cannot listen on ${host}:${port} (HOST:PORT, or --host and --port)`
  if (unresolved || error?.code === "EADDRNOTAVAIL" || error?.code === "EINVAL") {
    return `${head}: HOST must be an address of this machine, or a name that resolves to one: 0.0.0.0 (every ` +
      `interface), 127.0.0.1 (this machine only), :: or an interface's own address (got ${JSON.stringify(host)})`
  }
  if (error?.code === "EACCES") {
    return `${head}: PORT ${port} needs privileges that ${currentUser()} does not have: ports below 1024 are ` +
      `reserved to privileged processes; pick one from 1024 up, such as 8080, and map it in front (a load ` +
      `balancer, -p 80:8080) (got "${port}")`
  }
  return `${head}: ${String(error?.message ?? cause)}`
}

/** Whether `host` is a name (not an address) that does not resolve here. */
const unresolvable = (host: string): Effect.Effect<boolean> =>
  isIP(host) !== 0 || isWildcardHost(host)
    ? Effect.succeed(false)
    : Effect.promise(() => lookup(host).then(() => false, () => true))

/**
 * The API reference as a person on this machine opens it: on a wildcard host (`0.0.0.0`, `::`), which no browser
 * opens as such, at `localhost`; else at the address listened on.
 */
export const docsUrl = (listening: URL, host: string): string => {
  const url = new URL("/docs", listening)
  if (isWildcardHost(host)) url.hostname = "localhost"
  return url.href
}

/**
 * Bun's listener. On interruption (SIGTERM/SIGINT) it drains: readiness turns 503, it keeps serving for
 * `shutdownDelay`, stops accepting, lets the requests in flight finish (up to `shutdownTimeout`), and only then do the
 * layers below it, the database among them, close.
 */
export const ListenerLive = (options: ListenOptions) =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const handler = yield* WebHandler
    const lifecycle = yield* Lifecycle
    let draining = false
    const served = closingWhileDraining(handler, () => draining)
    const server = yield* Effect.acquireRelease(
      Effect.try({
        try: () =>
          Bun.serve({
            hostname: options.host,
            port: options.port,
            // The direct routes, matched by Bun itself; every other request goes to the dispatcher.
            routes: served.routes,
            fetch: served.fetch,
            idleTimeout: idleTimeoutSeconds(Duration.sum(options.requestTimeout, handler.longestHold)),
            // Bodies are limited by the middleware (a JSON 413 past 64 KiB, read no further), not by Bun's bare 413.
            maxRequestBodySize: Number.MAX_SAFE_INTEGER
          }),
        catch: (cause) => cause
      }).pipe(Effect.catchAll((cause) =>
        Effect.flatMap(unresolvable(options.host), (unresolved) =>
          new CommandFailed({ message: listenFailure(options.host, options.port, cause, unresolved) }))
      )),
      (server) =>
        Effect.gen(function*() {
          yield* lifecycle.startDrain
          draining = true
          yield* Effect.logInfo(shuttingDownLine(options)).pipe(
            Effect.annotateLogs({
              shutdownDelay: Duration.format(options.shutdownDelay),
              shutdownTimeout: Duration.format(options.shutdownTimeout)
            })
          )
          if (Duration.toMillis(options.shutdownDelay) > 0) {
            yield* Effect.sleep(options.shutdownDelay)
          }
          // The event streams end now: what is left in flight are requests. A stream whose client stopped reading
          // would hold its answer pending until Bun can write again: its connection goes once idle a second.
          const lasting = [...lifecycle.lasting]
          yield* lifecycle.stopAccepting
          for (const request of lasting) {
            server.timeout(request, 1)
          }
          yield* Effect.logInfo("draining").pipe(Effect.annotateLogs("inFlight", server.pendingRequests))
          // A finalizer is uninterruptible: the wait is made interruptible so that the timeout can end it.
          const drained = yield* Effect.promise(() =>
            server.stop(false)
          ).pipe(
            Effect.interruptible,
            Effect.timeoutOption(options.shutdownTimeout)
          )
          if (Option.isNone(drained)) {
            yield* Effect.logWarning("shutdown timeout: cutting off the requests still in flight").pipe(
              Effect.annotateLogs("inFlight", server.pendingRequests)
            )
          }
          // Closes whatever is left (idle keep-alive connections included), so nothing holds the process open.
          yield* Effect.promise(() => server.stop(true))
          yield* Effect.logInfo("stopped")
        })
    )
    // The executable starts with the JIT reluctant (`--compile-jit-policy`: start-up code runs once); serving is not.
    Bun.unsafe.setJITPolicy(1)
    yield* Effect.logInfo("petstore is listening").pipe(
      Effect.annotateLogs({
        docs: docsUrl(server.url, options.host),
        ...options.describe,
        address: server.url.href.replace(/\/$/, "")
      })
    )
  }))
