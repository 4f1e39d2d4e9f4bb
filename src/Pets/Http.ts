/**
 * The catalogue's handlers: each takes the decoded request, asks the repository, and adds the headers the contract
 * gives the answer (`Location`, `Link`, the deprecation headers). Typed by the declaration (`GroupHandlers`); the
 * HttpApi app (`PetsHttpLive`) and the request pipeline call these same functions.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { BASE_PATH, ServedApi } from "../Api.js"
import { NotFound } from "../Domain/Errors.js"
import { LIMIT_DEFAULT, type ListPetsQuery, type Pet } from "../Domain/Pet.js"
import { addResponseHeaders } from "../ResponseHeaders.js"
import type { GroupHandlers } from "../Serving/Handlers.js"
import { orUnavailable } from "../Unavailable.js"
import { DEPRECATED_SINCE, Deprecation, SUNSET } from "./Api.js"
import { PetsRepo } from "./Repo.js"

const PETS_PATH = `${BASE_PATH}/pets`

/** The `Link` to the page after `last`, keeping the query's limit and status filter. */
export const nextPageLink = (query: ListPetsQuery & { readonly limit: number }, last: Pet): string => {
  const params = new URLSearchParams({ limit: String(query.limit) })
  if (query.status !== undefined) params.set("status", query.status)
  params.set("after", String(last.id))
  return `<${PETS_PATH}?${params}>; rel="next"`
}

export class PetsHandlers extends Effect.Service<PetsHandlers>()("Pets/Handlers", {
  effect: Effect.map(PetsRepo, (repo): GroupHandlers<typeof ServedApi, "pets"> => ({
    listPets: ({ urlParams }) => {
      const query = { ...urlParams, limit: urlParams.limit ?? LIMIT_DEFAULT }
      return repo.list(query).pipe(
        orUnavailable,
        Effect.tap((page) => page.more ? addResponseHeaders({ link: nextPageLink(query, page.pets.at(-1)!) }) : Effect.void),
        Effect.map((page) => page.pets)
      )
    },
    createPet: ({ payload }) =>
      repo.create(payload).pipe(
        orUnavailable,
        Effect.tap((pet) => addResponseHeaders({ location: `${PETS_PATH}/${pet.id}` }))
      ),
    getPet: ({ path }) =>
      repo.findById(path.petId).pipe(
        orUnavailable,
        Effect.flatMap(Option.match({
          onNone: () => Effect.fail(new NotFound({ code: "not_found", message: `No pet has the id ${path.petId}.` })),
          onSome: Effect.succeed
        }))
      )
  }))
}) {}

export const PetsHttpLive = HttpApiBuilder.group(ServedApi, "pets", (handlers) =>
  Effect.map(PetsHandlers, (pets) =>
    handlers
      .handle("listPets", pets.listPets)
      .handle("createPet", pets.createPet)
      .handle("getPet", pets.getPet)))

/** The headers of every getPet answer (the `Deprecation` middleware). */
export const DEPRECATION_HEADERS: Readonly<Record<string, string>> = {
  deprecation: `@${DEPRECATED_SINCE}`,
  sunset: SUNSET,
  link: `<${PETS_PATH}>; rel="successor-version"`
}

/** Every answer of getPet, whatever its status, announces the deprecation. */
export const DeprecationLive = Layer.succeed(Deprecation, addResponseHeaders(DEPRECATION_HEADERS))
