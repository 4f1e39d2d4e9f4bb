/**
 * Background pruning (expired idempotency records, ended rate-limit windows): a batch at a time with a pause between
 * batches, so that it never holds a request up for long; every interval for the life of a scope, a failure logged and
 * tried again at the next interval.
 */
import { Duration, Effect, Schedule, type Scope } from "effect"

const PRUNE_BATCH = 500
const PRUNE_PAUSE = Duration.millis(10)

/** What a step of pruning did: how many rows it removed, and whether more may be left. */
export interface PruneStep {
  readonly released: number
  readonly more: boolean
}

/** Runs `step` on batches of rows until nothing is left; logs and answers how many rows went. */
export const inBatches = <E, R>(step: (batch: number) => Effect.Effect<PruneStep, E, R>, what: string) =>
  Effect.gen(function*() {
    let released = 0
    for (;;) {
      const done = yield* step(PRUNE_BATCH)
      released += done.released
      if (!done.more) break
      yield* Effect.sleep(PRUNE_PAUSE)
    }
    if (released > 0) yield* Effect.logDebug(`${what} pruned`, { deleted: released })
    return released
  })

/** Runs `prune` every `interval` (the first after one interval), in a fiber of the scope. */
export const everyInterval = <A, E, R>(
  prune: Effect.Effect<A, E, R>,
  interval: Duration.Duration,
  what: string
): Effect.Effect<void, never, R | Scope.Scope> =>
  prune.pipe(
    Effect.catchAllCause((cause) => Effect.logWarning(`pruning ${what} failed`, cause)),
    Effect.repeat(Schedule.spaced(interval)),
    Effect.delay(interval),
    Effect.forkScoped,
    Effect.asVoid
  )
