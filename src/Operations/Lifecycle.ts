/** Serving, or draining after SIGTERM/SIGINT (readiness answers 503 while the requests in flight are completed). */
import { Effect, Metric, Ref } from "effect"

/** The same state as a metric (`/metrics`, OTLP): 1 once the drain has started. */
export const drainingGauge = Metric.gauge("petstore_draining", {
  description: "1 once SIGTERM/SIGINT has started the drain, else 0"
})

export class Lifecycle extends Effect.Service<Lifecycle>()("Lifecycle", {
  effect: Effect.map(Ref.make(false), (draining) => ({
    draining: Ref.get(draining),
    startDrain: Effect.zipRight(Ref.set(draining, true), Metric.set(drainingGauge, 1))
  }))
}) {}
