/**
 * Bun's listener in front of the web handler, and its graceful drain.
 */
import { type Duration, Effect, Layer } from "effect"
import { type AppOptions, WebHandler, WebHandlerLive } from "./Http.js"
import { Lifecycle } from "./Lifecycle.js"

export interface ListenOptions {
  readonly host: string
  readonly port: number
  /** How long in-flight requests may take to finish after SIGTERM/SIGINT before they are cut off. */
  readonly shutdownTimeout: Duration.Duration
  /** Fields for the start-up log line (database, version). */
  readonly describe?: Record<string, string>
}

/**
 * Bun's listener. On interruption (SIGTERM/SIGINT) it drains: readiness turns 503 at once, the listener stops
 * accepting, the requests in flight finish with their real answers (up to `shutdownTimeout`, then the rest are cut
 * off), and only then do the layers below it — the database among them — close.
 */
export const ListenerLive = (options: ListenOptions) =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const handler = yield* WebHandler
    const lifecycle = yield* Lifecycle
    const server = yield* Effect.acquireRelease(
      Effect.try({
        try: () =>
          Bun.serve({
            hostname: options.host,
            port: options.port,
            // The direct routes, matched by Bun itself; every other request goes to the dispatcher.
            routes: handler.routes,
            fetch: handler,
            // Bodies are limited by the middleware (a JSON 413 past 64 KiB, read no further), not by Bun's bare 413.
            maxRequestBodySize: Number.MAX_SAFE_INTEGER
          }),
        catch: (cause) => new ListenError({ host: options.host, port: options.port, cause })
      }),
      (server) =>
        Effect.gen(function*() {
          yield* lifecycle.startDrain
          yield* Effect.logInfo("draining").pipe(Effect.annotateLogs("inFlight", server.pendingRequests))
          // A finalizer is uninterruptible: the wait is made interruptible so that the timeout can end it.
          const drained = yield* Effect.promise(() => server.stop(false)).pipe(
            Effect.interruptible,
            Effect.timeoutOption(options.shutdownTimeout)
          )
          if (drained._tag === "None") {
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
      Effect.annotateLogs({ ...options.describe, address: server.url.href.replace(/\/$/, "") })
    )
  }))

export class ListenError extends Error {
  readonly _tag = "ListenError"
  constructor(options: { readonly host: string; readonly port: number; readonly cause: unknown }) {
    super(`Cannot listen on ${options.host}:${options.port}: ${String((options.cause as Error)?.message ?? options.cause)}`)
  }
}

/** The HTTP server: the listener in front of the application. Needs a SQL client. */
export const HttpLive = (options: AppOptions & ListenOptions) =>
  ListenerLive(options).pipe(
    Layer.provide(WebHandlerLive(options)),
    Layer.provide(Lifecycle.Default)
  )
