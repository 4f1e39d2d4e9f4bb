/**
 * A listener that cannot start says which setting chose its address: `PORT` (or `--port`) for the API's,
 * `METRICS_ADDRESS` for the metrics'.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { describeConfigError } from "../src/Config.js"
import { MetricsServerLive } from "../src/Observability/MetricsServer.js"
import { Lifecycle } from "../src/Operations/Lifecycle.js"
import { ListenerLive } from "../src/Operations/Listener.js"
import { metricsApartFrom } from "../src/Serve.js"
import type { Server } from "../src/Serving/Server.js"
import { WebHandler } from "../src/Serving/WebHandler.js"
import { withEnvironment } from "./support/observability.js"

/** A loopback port some other listener holds for the life of the scope. */
const takenPort = Effect.map(
  Effect.acquireRelease(
    Effect.sync(() => Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("someone else") })),
    (server) => Effect.promise(() => server.stop(true))
  ),
  (server) => server.port!
)

const handler: Server = Object.assign(() => new Response(), { routes: {} })

describe("a port already taken", () => {
  it.scoped("the API's listener names HOST and PORT", () =>
    Effect.gen(function*() {
      const port = yield* takenPort
      const error = yield* Layer.build(
        ListenerLive({
          host: "127.0.0.1",
          port,
          shutdownDelay: Duration.zero,
          shutdownTimeout: Duration.seconds(1),
          requestTimeout: Duration.seconds(15)
        }).pipe(Layer.provide([Layer.succeed(WebHandler, handler), Lifecycle.Default]))
      ).pipe(Effect.flip)
      expect(error.message).toContain(`Cannot listen on 127.0.0.1:${port} (HOST:PORT, or --host and --port)`)
      expect(error.message).toContain(`Is port ${port} in use?`)
    }))

  it.scoped("the metrics' listener names METRICS_ADDRESS", () =>
    Effect.gen(function*() {
      const port = yield* takenPort
      const error = yield* Layer.build(MetricsServerLive({ hostname: "127.0.0.1", port })).pipe(Effect.flip)
      expect(error.message).toContain(`METRICS_ADDRESS 127.0.0.1:${port}`)
      expect(error.message).toContain(`Is port ${port} in use?`)
    }))

  it.effect("METRICS_ADDRESS on the API's own port is refused before either listens, naming both settings", () =>
    Effect.gen(function*() {
      const error = yield* metricsApartFrom("0.0.0.0", 8080).pipe(
        Effect.flip,
        withEnvironment({ METRICS_ADDRESS: "127.0.0.1:8080" })
      )
      expect(describeConfigError(error)).toBe(
        "METRICS_ADDRESS 127.0.0.1:8080 is on the API's address (HOST 0.0.0.0, PORT 8080): the metrics are served on " +
          "a listener of their own; give METRICS_ADDRESS another port, such as 127.0.0.1:9464."
      )
      // Another port, or the same port on another host, is a listener of its own.
      yield* metricsApartFrom("0.0.0.0", 8080).pipe(withEnvironment({ METRICS_ADDRESS: "127.0.0.1:9464" }))
      yield* metricsApartFrom("10.0.0.1", 8080).pipe(withEnvironment({ METRICS_ADDRESS: "127.0.0.1:8080" }))
    }))
})
