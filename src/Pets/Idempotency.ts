/**
 * Creates sent with an `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header-07): the first is carried out and its
 * answer recorded in the same transaction as the pet (`PetsRepo.createOnce`); a retry with the same key and the same
 * payload gets that answer again; another payload is refused; a retry that overlaps the first is told to wait.
 *
 * Keys are scoped to the API key that sent them. Records live `IDEMPOTENCY_TTL` and are pruned by a background fiber,
 * in small batches, so pruning never holds a request up for long.
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Config, Duration, Effect, Either, Schedule, Schema } from "effect"
import { createHash } from "node:crypto"
import { parseDuration, variable } from "../Config.js"
import {
  type IdempotencyKeyInUse,
  idempotencyKeyInUse,
  type IdempotencyKeyReused,
  idempotencyKeyReused
} from "../Domain/Errors.js"
import { type NewPet, Pet } from "../Domain/Pet.js"
import { type CreateOnceResult, PetsRepo, type RecordedAnswer } from "./Repo.js"

/** `IDEMPOTENCY_TTL`: how long a create's answer is kept for its retries (a duration: `24h`, `90 minutes`). */
export const IdempotencyTtl = variable("IDEMPOTENCY_TTL", (text) =>
  Either.filterOrLeft(
    parseDuration(text),
    (ttl) => Duration.toMillis(ttl) > 0,
    () => "must be a positive duration such as 24h, 90 minutes or 2 hours"
  )).pipe(Config.withDefault(Duration.hours(24)))

/** Seconds a 409 `idempotency_key_in_use` asks the client to wait before retrying (`Retry-After`). */
export const RETRY_AFTER_IN_USE_SECONDS = 1

/** Rows deleted per statement while pruning, and the pause between statements. */
const PRUNE_BATCH = 500
const PRUNE_PAUSE = Duration.millis(10)
/** How often expired records are looked for: at most every minute, more often for a TTL under a minute. */
const pruneInterval = (ttl: Duration.Duration) => Duration.min(ttl, Duration.minutes(1))

/**
 * The fingerprint of a create: the SHA-256 of the decoded payload in a canonical form (its fields in a fixed order, the
 * name trimmed, the default status applied), so key order, white space and an omitted default do not change it.
 */
export const fingerprintOf = (pet: NewPet): string =>
  createHash("sha256").update(JSON.stringify([pet.name, pet.categoryId, pet.status])).digest("base64url")

const decodeRecordedPet = Schema.decodeUnknownSync(Schema.parseJson(Pet))

/** The outcome of an idempotent create, for the handler to answer. */
export type IdempotentOutcome =
  | { readonly _tag: "Created"; readonly pet: Pet }
  | { readonly _tag: "Replayed"; readonly pet: Pet; readonly answer: RecordedAnswer }

export class Idempotency extends Effect.Service<Idempotency>()("Pets/Idempotency", {
  scoped: Effect.gen(function*() {
    const repo = yield* PetsRepo
    const sql = yield* SqlClient.SqlClient
    const ttl = yield* IdempotencyTtl
    const ttlMillis = Duration.toMillis(ttl)
    const clock = yield* Effect.clock

    /**
     * The keys being created right now in this process, so that an overlapping retry is refused before it touches the
     * database (the transaction's advisory lock does the same across replicas on PostgreSQL).
     */
    const running = new Set<string>()

    /** Deletes expired records, a batch at a time, until none is left. */
    const prune = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      let deleted = 0
      for (;;) {
        const rows = yield* sql<{ readonly scope: string }>`DELETE FROM idempotency_keys
          WHERE (scope, idempotency_key) IN (
            SELECT scope, idempotency_key FROM idempotency_keys WHERE expires_at <= ${now} LIMIT ${PRUNE_BATCH})
          RETURNING scope`
        deleted += rows.length
        if (rows.length < PRUNE_BATCH) break
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
     * Creates the pet once for this (scope, key): the pet, or the recorded answer of the create that used the key
     * first. Fails with 409 while that create is still running, 422 when it had another payload.
     */
    const create = (options: {
      readonly scope: string
      readonly key: string
      readonly pet: NewPet
      readonly answer: (pet: Pet) => RecordedAnswer
    }) => {
      const id = `${options.scope}\n${options.key}`
      const fingerprint = fingerprintOf(options.pet)
      return Effect.suspend((): Effect.Effect<CreateOnceResult, SqlError.SqlError | IdempotencyKeyInUse> => {
        if (running.has(id)) return Effect.fail(idempotencyKeyInUse())
        running.add(id)
        const now = clock.unsafeCurrentTimeMillis()
        return repo.createOnce({
          pet: options.pet,
          scope: options.scope,
          key: options.key,
          fingerprint,
          now,
          expiresAt: now + ttlMillis,
          answer: options.answer
        }).pipe(Effect.ensuring(Effect.sync(() => running.delete(id))))
      }).pipe(Effect.flatMap((result): Effect.Effect<IdempotentOutcome, IdempotencyKeyInUse | IdempotencyKeyReused> => {
        switch (result._tag) {
          case "Created":
            return Effect.succeed(result)
          case "InUse":
            return Effect.fail(idempotencyKeyInUse())
          case "Recorded":
            return result.record.fingerprint === fingerprint
              ? Effect.succeed({
                _tag: "Replayed",
                pet: decodeRecordedPet(result.record.body),
                answer: result.record
              })
              : Effect.fail(idempotencyKeyReused())
        }
      }))
    }

    return { create, prune, ttl } as const
  })
}) {}
