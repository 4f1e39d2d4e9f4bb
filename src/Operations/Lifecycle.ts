/**
 * Serving, or draining after SIGTERM/SIGINT: readiness answers 503 while the listener still serves for
 * `SHUTDOWN_DELAY`, then it stops accepting and the requests in flight are completed. Responses that last (the change
 * feed's event streams) end when it stops accepting, so that their clients reconnect to another replica and the drain
 * does not wait for them.
 */
import { Deferred, Effect, Metric, Ref } from "effect"

/** The same state as a metric (`/metrics`, OTLP): 1 once the drain has started. */
export const drainingGauge = Metric.gauge("petstore_draining", {
  description: "1 once SIGTERM/SIGINT has started the drain, else 0"
})

export class Lifecycle extends Effect.Service<Lifecycle>()("Lifecycle", {
  effect: Effect.gen(function*() {
    const draining = yield* Ref.make(false)
    const stopping = yield* Deferred.make<void>()
    return {
      /**
       * The requests whose answers last (the event streams) while they do: once it stops accepting, the listener lets
       * go of each connection idle a second, as a client that stopped reading leaves its answer pending in Bun.
       */
      lasting: new Set<Request>(),
      draining: Ref.get(draining),
      startDrain: Effect.zipRight(Ref.set(draining, true), Metric.set(drainingGauge, 1)),
      /** The listener stops accepting connections. */
      stopAccepting: Deferred.succeed(stopping, undefined),
      /** Waits until the listener stops accepting connections. */
      stoppedAccepting: Deferred.await(stopping)
    }
  })
}) {}
