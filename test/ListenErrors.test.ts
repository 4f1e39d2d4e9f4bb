/**
 * A listener that cannot start says which setting chose its address: `PORT` (or `--port`) for the API's,
 * `METRICS_ADDRESS` for the metrics'.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { describeConfigError } from "../src/Config.js"
import { currentUser } from "../src/Database/DurableFile.js"
import { MetricsServerLive } from "../src/Observability/MetricsServer.js"
import { Lifecycle } from "../src/Operations/Lifecycle.js"
import { docsUrl, ListenerLive, listenFailure } from "../src/Operations/Listener.js"
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

const handler: Server = Object.assign(() => new Response(), { routes: {}, longestHold: Duration.zero })

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

describe("a listener that cannot start says what HOST or PORT got and what it takes", () => {
  it.scoped("a HOST that is no address of this machine (a name that does not resolve, another machine's address)", () =>
    Effect.gen(function*() {
      for (const host of ["not.a.host.invalid", "192.0.2.1"]) {
        const error = yield* Layer.build(
          ListenerLive({
            host,
            port: 8089,
            shutdownDelay: Duration.zero,
            shutdownTimeout: Duration.seconds(1),
            requestTimeout: Duration.seconds(15)
          }).pipe(Layer.provide([Layer.succeed(WebHandler, handler), Lifecycle.Default]))
        ).pipe(Effect.flip)
        expect(error.message).toBe(
          `Cannot listen on ${host}:8089 (HOST:PORT, or --host and --port): HOST must be an address of this machine, ` +
            `or a name that resolves to one: 0.0.0.0 (every interface), 127.0.0.1 (this machine only), :: or an ` +
            `interface's own address (got "${host}")`
        )
      }
    }))

  it("a port below 1024 without the privilege: says so, and which to pick instead", () => {
    const denied = Object.assign(new Error("permission denied 127.0.0.1:80"), { code: "EACCES" })
    expect(listenFailure("127.0.0.1", 80, denied, false)).toBe(
      `Cannot listen on 127.0.0.1:80 (HOST:PORT, or --host and --port): PORT 80 needs privileges that ` +
        `${currentUser()} does not have: ports below 1024 are reserved to privileged processes; pick one from 1024 ` +
        `up, such as 8080, and map it in front (a load balancer, -p 80:8080) (got "80")`
    )
  })

  it("another reason is shown as the operating system gives it", () => {
    const inUse = Object.assign(new Error("Failed to start server. Is port 8080 in use?"), { code: "EADDRINUSE" })
    expect(listenFailure("localhost", 8080, inUse, false)).toBe(
      "Cannot listen on localhost:8080 (HOST:PORT, or --host and --port): Failed to start server. Is port 8080 in use?"
    )
  })
})

describe("the start-up line's docs URL", () => {
  it("is on localhost when listening on every interface, else on the address listened on", () => {
    expect(docsUrl(new URL("http://0.0.0.0:8080/"), "0.0.0.0")).toBe("http://localhost:8080/docs")
    expect(docsUrl(new URL("http://[::]:8080/"), "::")).toBe("http://localhost:8080/docs")
    expect(docsUrl(new URL("http://127.0.0.1:8080/"), "127.0.0.1")).toBe("http://127.0.0.1:8080/docs")
    expect(docsUrl(new URL("http://[::1]:9000/"), "::1")).toBe("http://[::1]:9000/docs")
  })
})
