/**
 * The catalogue's handlers: each takes the decoded request, asks the repository, and sets the headers the contract
 * gives the answer (`Location`, `Link`, deprecation headers).
 */
import { HttpApiBuilder, HttpApp, HttpServerResponse } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { BASE_PATH, ServedApi } from "../Api.js"
import type { Answer } from "../Dispatch.js"
import { NotFound, type Unavailable } from "../Domain/Errors.js"
import { orUnavailable } from "../Unavailable.js"
import { LIMIT_DEFAULT, type ListPetsQuery, type NewPet, type Pet, type PetId } from "../Domain/Pet.js"
import { DEPRECATED_SINCE, Deprecation, SUNSET } from "./Api.js"
import { PetsRepo } from "./Repo.js"

const PETS_PATH = `${BASE_PATH}/pets`

const setHeaders = (headers: Record<string, string>) =>
  HttpApp.appendPreResponseHandler((_request, response) => Effect.succeed(HttpServerResponse.setHeaders(response, headers)))

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
  effect: Effect.map(PetsRepo, (repo) => ({
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
    createPet: ({ payload }: { readonly payload: NewPet }): Effect.Effect<Answer<Pet>, Unavailable> =>
      repo.create(payload).pipe(
        orUnavailable,
        Effect.map((pet) => ({ value: pet, headers: { location: `${PETS_PATH}/${pet.id}` } }))
      ),
    getPet: ({ path }: { readonly path: { readonly petId: PetId } }): Effect.Effect<Answer<Pet>, Unavailable | NotFound> =>
      repo.findById(path.petId).pipe(
        orUnavailable,
        Effect.flatMap(Option.match({
          onNone: () => Effect.fail(new NotFound({ code: "not_found", message: `No pet has the id ${path.petId}.` })),
          onSome: (pet) => Effect.succeed({ value: pet })
        }))
      )
  }))
}) {}

/** An answer in the HttpApi app: its headers through a pre-response handler, its value to the endpoint's encoder. */
const answered = <A, E>(answer: Effect.Effect<Answer<A>, E>) =>
  Effect.flatMap(answer, ({ headers, value }) => headers === undefined ? Effect.succeed(value) : Effect.as(setHeaders(headers), value))

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
export const DeprecationLive = Layer.succeed(Deprecation, setHeaders(DEPRECATION_HEADERS))
