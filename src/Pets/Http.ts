/**
 * The catalogue's handlers: each takes the decoded request, asks the repository, and sets the headers the contract
 * gives the answer (`Location`, `Link`, deprecation headers).
 */
import { HttpApiBuilder, HttpApp, HttpServerResponse } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { BASE_PATH, ServedApi } from "../Api.js"
import { NotFound, orUnavailable } from "../Domain/Errors.js"
import { LIMIT_DEFAULT, type ListPetsQuery, type Pet } from "../Domain/Pet.js"
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

export const PetsHttpLive = HttpApiBuilder.group(ServedApi, "pets", (handlers) =>
  Effect.gen(function*() {
    const repo = yield* PetsRepo
    return handlers
      .handle("listPets", ({ urlParams }) => {
        const query = { ...urlParams, limit: urlParams.limit ?? LIMIT_DEFAULT }
        return repo.list(query).pipe(
          orUnavailable,
          Effect.tap((page) => page.more ? setHeaders({ link: nextPageLink(query, page.pets.at(-1)!) }) : Effect.void),
          Effect.map((page) => page.pets)
        )
      })
      .handle("createPet", ({ payload }) =>
        repo.create(payload).pipe(
          orUnavailable,
          Effect.tap((pet) => setHeaders({ location: `${PETS_PATH}/${pet.id}` }))
        ))
      .handle("getPet", ({ path }) =>
        repo.findById(path.petId).pipe(
          orUnavailable,
          Effect.flatMap(Option.match({
            onNone: () => Effect.fail(new NotFound({ code: "not_found", message: `No pet has the id ${path.petId}.` })),
            onSome: Effect.succeed
          }))
        ))
  }))

const deprecationHeaders = {
  deprecation: `@${DEPRECATED_SINCE}`,
  sunset: SUNSET,
  link: `<${PETS_PATH}>; rel="successor-version"`
}

/** Every answer of getPet, whatever its status, announces the deprecation. */
export const DeprecationLive = Layer.succeed(Deprecation, setHeaders(deprecationHeaders))
