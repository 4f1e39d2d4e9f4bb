/**
 * The catalogue's handlers: each takes the decoded request, asks the repository, and sets the headers the contract
 * gives the answer (`Location`, `Link`, `Idempotent-Replayed`, `Retry-After`, deprecation headers).
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { BASE_PATH, ServedApi } from "../Api.js"
import { CurrentApiKey } from "../Auth/Api.js"
import type { Answer } from "../Dispatch.js"
import {
  type IdempotencyKeyInUse,
  type IdempotencyKeyReused,
  NotFound,
  type Unavailable
} from "../Domain/Errors.js"
import type { CreatePetHeaders } from "../Domain/Idempotency.js"
import { LIMIT_DEFAULT, type ListPetsQuery, type NewPet, type Pet, type PetId } from "../Domain/Pet.js"
import { addResponseHeaders } from "../ResponseHeaders.js"
import { orUnavailable } from "../Unavailable.js"
import { DEPRECATED_SINCE, Deprecation, SUNSET } from "./Api.js"
import { Idempotency, RETRY_AFTER_IN_USE_SECONDS } from "./Idempotency.js"
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

/**
 * The catalogue's handlers, written once. Both serving paths call these same functions with the decoded request:
 * the HttpApi app (`PetsHttpLive` below) and the routes derived from the same declaration (`Dispatch.ts`).
 */
export class PetsHandlers extends Effect.Service<PetsHandlers>()("Pets/Handlers", {
  effect: Effect.gen(function*() {
    const repo = yield* PetsRepo
    const idempotency = yield* Idempotency
    const created = (pet: Pet): Answer<Pet> => ({ value: pet, headers: { location: locationOf(pet) } })

    /** A create with an `Idempotency-Key`, scoped to the API key that sent it. */
    const createOnce = (key: string, payload: NewPet) =>
      Effect.flatMap(CurrentApiKey, (apiKey) =>
        idempotency.create({
          scope: apiKey.id,
          key,
          pet: payload,
          answer: (pet) => ({ status: 201, body: JSON.stringify(pet), location: locationOf(pet) })
        })).pipe(
          orUnavailable,
          Effect.tapErrorTag(
            "IdempotencyKeyInUse",
            () => addResponseHeaders({ "retry-after": String(RETRY_AFTER_IN_USE_SECONDS) })
          ),
          Effect.map((outcome): Answer<Pet> =>
            outcome._tag === "Created" ? created(outcome.pet) : {
              value: outcome.pet,
              headers: { location: outcome.answer.location ?? locationOf(outcome.pet), "idempotent-replayed": "true" }
            }
          )
        )

    return {
      listPets: ({ urlParams }: { readonly urlParams: ListPetsQuery }): Effect.Effect<Answer<ReadonlyArray<Pet>>, Unavailable> => {
        const query = { ...urlParams, limit: urlParams.limit ?? LIMIT_DEFAULT }
        return repo.list(query).pipe(
          orUnavailable,
          Effect.map((page) => ({
            value: page.pets,
            headers: page.more ? { link: nextPageLink(query, page.pets.at(-1)!) } : undefined
          }))
        )
      },
      createPet: ({ headers, payload }: {
        readonly payload: NewPet
        readonly headers?: CreatePetHeaders | undefined
      }): Effect.Effect<
        Answer<Pet>,
        Unavailable | IdempotencyKeyInUse | IdempotencyKeyReused,
        CurrentApiKey
      > => {
        const key = headers?.["idempotency-key"]
        if (key !== undefined) return createOnce(key, payload)
        return repo.create(payload).pipe(orUnavailable, Effect.map(created))
      },
      getPet: ({ path }: { readonly path: { readonly petId: PetId } }): Effect.Effect<Answer<Pet>, Unavailable | NotFound> =>
        repo.findById(path.petId).pipe(
          orUnavailable,
          Effect.flatMap(Option.match({
            onNone: () => Effect.fail(new NotFound({ code: "not_found", message: `No pet has the id ${path.petId}.` })),
            onSome: (pet) => Effect.succeed({ value: pet })
          }))
        )
    }
  }),
  dependencies: [Idempotency.Default]
}) {}

/** An answer in the HttpApi app: its headers through a pre-response handler, its value to the endpoint's encoder. */
const answered = <A, E, R>(answer: Effect.Effect<Answer<A>, E, R>) =>
  Effect.flatMap(answer, ({ headers, value }) => headers === undefined ? Effect.succeed(value) : Effect.as(addResponseHeaders(headers), value))

export const PetsHttpLive = HttpApiBuilder.group(ServedApi, "pets", (handlers) =>
  Effect.map(PetsHandlers, (pets) =>
    handlers
      .handle("listPets", (request) => answered(pets.listPets(request)))
      .handle("createPet", (request) => answered(pets.createPet(request)))
      .handle("getPet", (request) => answered(pets.getPet(request)))))

/** The headers of every getPet answer (the `Deprecation` middleware). */
export const DEPRECATION_HEADERS: Readonly<Record<string, string>> = {
  deprecation: `@${DEPRECATED_SINCE}`,
  sunset: SUNSET,
  link: `<${PETS_PATH}>; rel="successor-version"`
}

/** Every answer of getPet, whatever its status, announces the deprecation. */
export const DeprecationLive = Layer.succeed(Deprecation, addResponseHeaders(DEPRECATION_HEADERS))
