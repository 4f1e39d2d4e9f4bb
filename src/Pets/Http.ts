/**
 * The catalogue's handlers: each takes the decoded request, asks the repository, and adds the headers the contract
 * gives the answer (`Location`, `Link`, `Idempotent-Replayed`, a 409's `Retry-After`, the deprecation headers). Typed
 * by the declaration (`GroupHandlers`); the HttpApi app (`PetsHttpLive`) and the request pipeline call these same
 * functions.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Exit, Option } from "effect"
import { BASE_PATH, ServedApi } from "../Api.js"
import { CurrentApiKey } from "../Auth/Api.js"
import { type IdempotencyKeyInUse, type IdempotencyKeyReused, NotFound } from "../Domain/Errors.js"
import { LIMIT_DEFAULT, type ListPetsQuery, type NewPet, type Pet } from "../Domain/Pet.js"
import { flatMapNow, mapNow, serviceNow } from "../Immediate.js"
import { type Answer, answerWith, tapResponseHeaders } from "../ResponseHeaders.js"
import type { GroupHandlers } from "../Serving/Handlers.js"
import { layerDirect } from "../Serving/Middleware.js"
import { orUnavailable } from "../Unavailable.js"
import { DEPRECATED_SINCE, Deprecation, SUNSET } from "./Api.js"
import { Idempotency, outcomeOf, RETRY_AFTER_IN_USE_SECONDS } from "./Idempotency.js"
import { type CreateOnceResult, PetsRepo } from "./Repo.js"

const PETS_PATH = `${BASE_PATH}/pets`

/** A 409 `idempotency_key_in_use` asks the client to retry in a moment. */
const IN_USE_HEADERS: Readonly<Record<string, string>> = { "retry-after": String(RETRY_AFTER_IN_USE_SECONDS) }

/** The address of a pet (`Location` of its 201). */
const locationOf = (pet: Pet) => `${PETS_PATH}/${pet.id}`

/**
 * An idempotent create's answer, from what the store found (a database failure is a 503 by then): the outcome that
 * means for the client (`outcomeOf`), with the pet's `Location` (a replay said so) or a 409's `Retry-After`.
 */
const answerOnce =
  (payload: NewPet) =>
  <E>(stored: Exit.Exit<CreateOnceResult, E>): Answer<Pet, E | IdempotencyKeyInUse | IdempotencyKeyReused> => {
    if (Exit.isFailure(stored)) return [stored as Exit.Exit<never, E>, undefined]
    const outcome = outcomeOf(payload, stored.value)
    if (Exit.isFailure(outcome)) {
      const refused = outcome as Exit.Exit<never, IdempotencyKeyInUse | IdempotencyKeyReused>
      return [refused, stored.value._tag === "InUse" ? IN_USE_HEADERS : undefined]
    }
    const { _tag, pet } = outcome.value
    const location = locationOf(pet)
    return [Exit.succeed(pet), _tag === "Created" ? { location } : { location, "idempotent-replayed": "true" }]
  }

/** The `Link` to the page after `last`, keeping the query's limit and status filter. */
export const nextPageLink = (query: ListPetsQuery & { readonly limit: number }, last: Pet): string => {
  const params = new URLSearchParams({ limit: String(query.limit) })
  if (query.status !== undefined) params.set("status", query.status)
  params.set("after", String(last.id))
  return `<${PETS_PATH}?${params}>; rel="next"`
}

export class PetsHandlers extends Effect.Service<PetsHandlers>()("Pets/Handlers", {
  effect: Effect.gen(function*() {
    const repo = yield* PetsRepo
    const idempotency = yield* Idempotency

    /**
     * A create sent with an `Idempotency-Key`, scoped to the API key that sent it: the new pet, or the pet that the
     * create which used the key first made, answered as it was then (`Idempotent-Replayed: true`).
     */
    const createOnce = (key: string, payload: NewPet) =>
      flatMapNow(
        serviceNow(CurrentApiKey),
        (apiKey) =>
          answerWith(orUnavailable(idempotency.create({ scope: apiKey.id, key, pet: payload })), answerOnce(payload))
      )

    return {
      listPets: ({ urlParams }) => {
        const query = { ...urlParams, limit: urlParams.limit ?? LIMIT_DEFAULT }
        return repo.list(query).pipe(
          orUnavailable,
          tapResponseHeaders((page) => page.more ? { link: nextPageLink(query, page.pets.at(-1)!) } : undefined),
          mapNow((page) => page.pets)
        )
      },
      createPet: ({ headers, payload }) => {
        const key = headers["idempotency-key"]
        if (key !== undefined) return createOnce(key, payload)
        return repo.create(payload).pipe(orUnavailable, tapResponseHeaders((pet) => ({ location: locationOf(pet) })))
      },
      getPet: ({ path }) =>
        repo.findById(path.petId).pipe(
          orUnavailable,
          // A pet that is not there is known at once too (`Exit.fail`: no fiber needed to say so).
          flatMapNow(Option.match({
            onNone: () => Exit.fail(new NotFound({ code: "not_found", message: `No pet has the id ${path.petId}.` })),
            onSome: Exit.succeed
          }))
        )
    } satisfies GroupHandlers<typeof ServedApi, "pets"> as GroupHandlers<typeof ServedApi, "pets">
  }),
  dependencies: [Idempotency.Default]
}) {}

export const PetsHttpLive = HttpApiBuilder.group(
  ServedApi,
  "pets",
  (handlers) =>
    Effect.map(PetsHandlers, (pets) =>
      handlers
        .handle("listPets", pets.listPets)
        .handle("createPet", pets.createPet)
        .handle("getPet", pets.getPet))
)

/** The headers of every getPet answer (the `Deprecation` middleware). */
export const DEPRECATION_HEADERS: Readonly<Record<string, string>> = {
  deprecation: `@${DEPRECATED_SINCE}`,
  sunset: SUNSET,
  link: `<${PETS_PATH}>; rel="successor-version"`
}

/** Every answer of getPet, whatever its status, announces the deprecation. */
export const DeprecationLive = layerDirect(
  Deprecation,
  Effect.succeed((request) => {
    Object.assign(request.answerHeaders, DEPRECATION_HEADERS)
    return Exit.void
  })
)
