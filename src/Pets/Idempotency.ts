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
import { Clock, Config, Duration, Effect, Either } from "effect"
import { parseDuration, variable } from "../Config.js"
import { everyInterval, inBatches } from "../Database/Pruning.js"
import {
  type IdempotencyKeyInUse,
  idempotencyKeyInUse,
  type IdempotencyKeyReused,
  idempotencyKeyReused
} from "../Domain/Errors.js"
import type { NewPet, Pet } from "../Domain/Pet.js"
import { type CreateOnceResult, PetsRepo } from "./Repo.js"

/** `IDEMPOTENCY_TTL`: how long a create's answer is kept for its retries (a duration: `24h`, `90 minutes`). */
export const IdempotencyTtl = variable("IDEMPOTENCY_TTL", (text) =>
  Either.filterOrLeft(
    parseDuration(text),
    (ttl) => Duration.toMillis(ttl) > 0,
    () => "must be a positive duration such as 24h, 90 minutes or 2 hours"
  )).pipe(Config.withDefault(Duration.hours(24)))

/** Seconds a 409 `idempotency_key_in_use` asks the client to wait before retrying (`Retry-After`). */
export const RETRY_AFTER_IN_USE_SECONDS = 1

/**
 * How often expired records are looked for: every TTL, kept between once a second and once a minute. An expired
 * record already counts as absent, so pruning only gives its room back: a TTL of a few milliseconds does not make an
 * idle server prune all the time.
 */
const pruneInterval = (ttl: Duration.Duration) =>
  Duration.clamp(ttl, { minimum: Duration.seconds(1), maximum: Duration.minutes(1) })

/**
 * Whether a retry sends what the create that used its key first sent: the decoded payload (the name trimmed, the
 * default status applied) against the pet that create made, whose row holds exactly that payload. So key order, white
 * space and an omitted default do not make a retry another request; any other difference does.
 */
export const isSamePayload = (pet: NewPet, created: Pet): boolean =>
  pet.name === created.name && pet.categoryId === created.categoryId && pet.status === created.status

/** The outcome of an idempotent create, for the handler to answer: the pet made now, or the one made before. */
export type IdempotentOutcome = { readonly _tag: "Created" | "Replayed"; readonly pet: Pet }

/**
 * What an idempotent create's result means for the client who sent `pet`: the pet made now; the pet made before for a
 * retry with the same payload (`Replayed`); 409 while the create that holds the key is still running; 422 when it had
 * another payload.
 */
export const outcomeOf = (
  pet: NewPet,
  result: CreateOnceResult
): Effect.Effect<IdempotentOutcome, IdempotencyKeyInUse | IdempotencyKeyReused> => {
  switch (result._tag) {
    case "Created":
      return Effect.succeed(result)
    case "InUse":
      return Effect.fail(idempotencyKeyInUse())
    case "Recorded":
      return isSamePayload(pet, result.pet)
        ? Effect.succeed({ _tag: "Replayed", pet: result.pet })
        : Effect.fail(idempotencyKeyReused())
  }
}

export class Idempotency extends Effect.Service<Idempotency>()("Pets/Idempotency", {
  scoped: Effect.gen(function*() {
    const repo = yield* PetsRepo
    const ttl = yield* IdempotencyTtl
    const ttlMillis = Duration.toMillis(ttl)

    /** Forgets expired records (their pets stay), a batch at a time, until none is left. */
    const prune = Effect.flatMap(
      Clock.currentTimeMillis,
      (now) => inBatches((batch) => repo.releaseExpired(now, batch), "expired idempotency records")
    ).pipe(Effect.withSpan("Idempotency.prune"))

    yield* everyInterval(prune, pruneInterval(ttl), "expired idempotency records")

    /**
     * Creates the pet once for this (scope, key): what the store found — the pet made now, the one that the create
     * which used the key first made, or the key held by a create still running. `outcomeOf` says what that means for
     * the client.
     */
    const create = (options: { readonly scope: string; readonly key: string; readonly pet: NewPet }) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => repo.createOnce({ ...options, now, expiresAt: now + ttlMillis }))

    return { create, prune, ttl } as const
  })
}) {}
