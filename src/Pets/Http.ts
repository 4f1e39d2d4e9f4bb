/**
 * The catalogue's handlers: each takes the decoded request, asks the repository, and adds the headers the contract
 * gives the answer (`Location`, `Link`, `Idempotent-Replayed`, a 409's `Retry-After`, the deprecation headers).
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { BASE_PATH, ServedApi } from "../Api.js"
import { CurrentApiKey } from "../Auth/Api.js"
import { petNotFound } from "../Domain/Errors.js"
import type { CreatePetHeaders } from "../Domain/Idempotency.js"
import { LIMIT_DEFAULT, type ListPetsQuery, type NewPet, type Pet, type PetId } from "../Domain/Pet.js"
import { addResponseHeaders } from "../ResponseHeaders.js"
import { orUnavailable } from "../Unavailable.js"
import { DEPRECATED_SINCE, Deprecation, SUNSET } from "./Api.js"
import { Idempotency, outcomeOf, RETRY_AFTER_IN_USE_SECONDS } from "./Idempotency.js"
import { PetsRepo } from "./Repo.js"

const PETS_PATH = `${BASE_PATH}/pets`

/** The address of a pet (`Location` of its 201). */
const locationOf = (pet: Pet) => `${PETS_PATH}/${pet.id}`

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
      Effect.gen(function*() {
        const apiKey = yield* CurrentApiKey
        const stored = yield* orUnavailable(idempotency.create({ scope: apiKey.id, key, pet: payload }))
        if (stored._tag === "InUse") yield* addResponseHeaders({ "retry-after": String(RETRY_AFTER_IN_USE_SECONDS) })
        const { _tag, pet } = yield* outcomeOf(payload, stored)
        yield* addResponseHeaders(
          _tag === "Created"
            ? { location: locationOf(pet) }
            : { location: locationOf(pet), "idempotent-replayed": "true" }
        )
        return pet
      })

    const listPets = ({ urlParams }: { readonly urlParams: ListPetsQuery }) =>
      Effect.gen(function*() {
        const query = { ...urlParams, limit: urlParams.limit ?? LIMIT_DEFAULT }
        const page = yield* orUnavailable(repo.list(query))
        if (page.more) yield* addResponseHeaders({ link: nextPageLink(query, page.pets.at(-1)!) })
        return page.pets
      })

    const createPet = ({ headers, payload }: { readonly headers: CreatePetHeaders; readonly payload: NewPet }) =>
      Effect.gen(function*() {
        const key = headers["idempotency-key"]
        if (key !== undefined) return yield* createOnce(key, payload)
        const pet = yield* orUnavailable(repo.create(payload))
        yield* addResponseHeaders({ location: locationOf(pet) })
        return pet
      })

    const getPet = ({ path }: { readonly path: { readonly petId: PetId } }) =>
      Effect.gen(function*() {
        const found = yield* orUnavailable(repo.findById(path.petId))
        if (Option.isNone(found)) return yield* petNotFound(path.petId)
        return found.value
      })

    return { listPets, createPet, getPet } as const
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

/** The headers of every getPet answer. */
export const DEPRECATION_HEADERS: Readonly<Record<string, string>> = {
  deprecation: `@${DEPRECATED_SINCE}`,
  sunset: SUNSET,
  link: `<${PETS_PATH}>; rel="successor-version"`
}

/** Every answer of getPet, whatever its status, announces the deprecation. */
export const DeprecationLive = Layer.succeed(Deprecation, addResponseHeaders(DEPRECATION_HEADERS))
