/**
 * Creates sent with an `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header-07), scoped to the API key that
 * sent them: the first is carried out and its record (the key, in the pet's own row) written with the pet
 * (`PetsRepo.createOnce`); a retry with the same key and payload is answered with that pet again; another payload is
 * refused (422); a retry that overlaps the first is told to wait (409), as the repository knows which keys a running
 * create holds. Records live `IDEMPOTENCY_TTL`; a background fiber prunes them in small batches.
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
 * Whether a retry sends what the key's first create sent: the decoded payload against the pet that create made, so key
 * order, white space and an omitted default do not make a retry another request; any other difference does.
 */
export const isSamePayload = (pet: NewPet, created: Pet): boolean =>
  pet.name === created.name && pet.categoryId === created.categoryId && pet.status === created.status

/** What the store found means for the client who sent `pet`: the pet made now or before, 409 or 422. */
export const outcomeOf = (
  pet: NewPet,
  result: CreateOnceResult
): Effect.Effect<
  { readonly _tag: "Created" | "Replayed"; readonly pet: Pet },
  IdempotencyKeyInUse | IdempotencyKeyReused
> => {
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

    // Expired records already count as absent: pruning only gives their room back, every TTL (1 s to 1 min).
    const prune = Effect.flatMap(
      Clock.currentTimeMillis,
      (now) => inBatches((batch) => repo.releaseExpired(now, batch), "expired idempotency records")
    ).pipe(Effect.withSpan("Idempotency.prune"))
    const interval = Duration.clamp(ttl, { minimum: Duration.seconds(1), maximum: Duration.minutes(1) })
    yield* everyInterval(prune, interval, "expired idempotency records")

    /** Creates `pet` once for this (scope, key): the pet made now, or the one the first create with the key made. */
    const create = (scope: string, key: string, pet: NewPet) =>
      Clock.currentTimeMillis.pipe(
        Effect.flatMap((now) => repo.createOnce({ scope, key, pet, now, expiresAt: now + Duration.toMillis(ttl) })),
        Effect.flatMap((result) => outcomeOf(pet, result))
      )

    return { create } as const
  })
}) {}
