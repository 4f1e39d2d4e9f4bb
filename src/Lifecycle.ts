/**
 * Where the process is in its life: serving, or draining after SIGTERM/SIGINT (readiness then answers 503 so that a
 * load balancer stops sending traffic, while the requests already in flight are completed).
 */
import { Effect, Ref } from "effect"

export class Lifecycle extends Effect.Service<Lifecycle>()("Lifecycle", {
  effect: Effect.map(Ref.make(false), (draining) => ({
    draining: Ref.get(draining),
    startDrain: Ref.set(draining, true)
  }))
}) {}
