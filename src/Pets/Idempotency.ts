/**
 * Creates sent with an `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header-07): the first is carried out and
 * its record (the key, in the pet's own row) written with the pet (`PetsRepo.createOnce`); a retry with the same key
 * and the same payload is answered with that pet again; another payload is refused.
 *
 * A retry that overlaps the first is told to wait (409): the repository knows the first holds the key (on PostgreSQL
 * its transaction's advisory lock, whichever connection or replica runs it; on SQLite the keys of the writer's
 * transaction not yet settled), so this service keeps no table of running keys, and a create costs no step to forget one.
 *
 * Keys are scoped to the API key that sent them. Records live `IDEMPOTENCY_TTL` and are pruned by a background fiber,
 * in small batches, so pruning never holds a request up for long.
 */
import { Clock, Config, Duration, Effect, Either, Exit, Schedule } from "effect"
import { parseDuration, variable } from "../Config.js"
import {
  type IdempotencyKeyInUse,
  idempotencyKeyInUse,
  type IdempotencyKeyReused,
  idempotencyKeyReused
} from "../Domain/Errors.js"
import type { NewPet, Pet } from "../Domain/Pet.js"
import { PetsRepo } from "./Repo.js"

/** `IDEMPOTENCY_TTL`: how long a create's answer is kept for its retries (a duration: `24h`, `90 minutes`). */
export const IdempotencyTtl = variable("IDEMPOTENCY_TTL", (text) =>
  Either.filterOrLeft(
    parseDuration(text),
    (ttl) => Duration.toMillis(ttl) > 0,
    () => "must be a positive duration such as 24h, 90 minutes or 2 hours"
  )).pipe(Config.withDefault(Duration.hours(24)))

/** Seconds a 409 `idempotency_key_in_use` asks the client to wait before retrying (`Retry-After`). */
export const RETRY_AFTER_IN_USE_SECONDS = 1

/** How much one step of pruning looks at (`PetsRepo.releaseExpired`), and the pause between steps. */
const PRUNE_BATCH = 500
const PRUNE_PAUSE = Duration.millis(10)
/** How often expired records are looked for: at most every minute, more often for a TTL under a minute. */
const pruneInterval = (ttl: Duration.Duration) => Duration.min(ttl, Duration.minutes(1))

/**
 * Whether a retry sends what the create that used its key first sent: the decoded payload (the name trimmed, the
 * default status applied) against the pet that create made, whose row holds exactly that payload. So key order, white
 * space and an omitted default do not make a retry another request; any other difference does.
 */
export const isSamePayload = (pet: NewPet, created: Pet): boolean =>
  pet.name === created.name && pet.categoryId === created.categoryId && pet.status === created.status

/** The outcome of an idempotent create, for the handler to answer: the pet made now, or the one made before. */
export type IdempotentOutcome = { readonly _tag: "Created" | "Replayed"; readonly pet: Pet }

export class Idempotency extends Effect.Service<Idempotency>()("Pets/Idempotency", {
  scoped: Effect.gen(function*() {
    const repo = yield* PetsRepo
    const ttl = yield* IdempotencyTtl
    const ttlMillis = Duration.toMillis(ttl)
    const clock = yield* Effect.clock

    /** Forgets expired records, a batch at a time, until none is left. */
    const prune = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      let deleted = 0
      for (;;) {
        const step = yield* repo.releaseExpired(now, PRUNE_BATCH)
        deleted += step.released
        if (!step.more) break
        yield* Effect.sleep(PRUNE_PAUSE)
      }
      if (deleted > 0) yield* Effect.logDebug("expired idempotency records pruned", { deleted })
    }).pipe(Effect.withSpan("Idempotency.prune"))

    yield* prune.pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("pruning expired idempotency records failed", cause)),
      Effect.repeat(Schedule.spaced(pruneInterval(ttl))),
      Effect.delay(pruneInterval(ttl)),
      Effect.forkScoped
    )

    /**
     * Creates the pet once for this (scope, key): the pet, or the one that the create which used the key first made.
     * Fails with 409 while that create is still running, 422 when it had another payload.
     */
    const create = (options: { readonly scope: string; readonly key: string; readonly pet: NewPet }) => {
      // Read when the effect is made: a create's effect is made for its request and run once.
      const now = clock.unsafeCurrentTimeMillis()
      return Effect.flatMap(
        repo.createOnce({ ...options, now, expiresAt: now + ttlMillis }),
        (result): Effect.Effect<IdempotentOutcome, IdempotencyKeyInUse | IdempotencyKeyReused> => {
          switch (result._tag) {
            case "Created":
              return Exit.succeed(result)
            case "InUse":
              return Exit.fail(idempotencyKeyInUse())
            case "Recorded":
              return isSamePayload(options.pet, result.pet)
                ? Exit.succeed({ _tag: "Replayed", pet: result.pet })
                : Exit.fail(idempotencyKeyReused())
          }
        }
      )
    }

    return { create, prune, ttl } as const
  })
}) {}
