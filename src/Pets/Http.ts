/**
 * The catalogue's handlers, registered with `HttpApiBuilder.group`: each takes the decoded request, asks the
 * repository, and adds the headers the contract gives the answer (`Location`, `Link`, `Idempotent-Replayed`, a 409's
 * `Retry-After`, the deprecation headers).
 */
import { HttpServerRequest } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { BASE_PATH, type GroupHandlers } from "../Api.js"
import { CurrentApiKey } from "../Auth/Api.js"
import { petNotFound } from "../Domain/Errors.js"
import { FEED_POSITION_HEADER, formatPosition } from "../Domain/Feed.js"
import { LIMIT_DEFAULT, type Pet } from "../Domain/Pet.js"
import { addResponseHeaders } from "../ResponseHeaders.js"
import * as ServerSentEvents from "../ServerSentEvents.js"
import { orUnavailable } from "../Unavailable.js"
import { DEPRECATED_SINCE, Deprecation, SUNSET } from "./Api.js"
import { FeedEvents } from "./FeedEvents.js"
import { FeedPolls } from "./FeedPolls.js"
import { Idempotency, RETRY_AFTER_IN_USE_SECONDS } from "./Idempotency.js"
import { PetsRepo } from "./Repo.js"

const PETS_PATH = `${BASE_PATH}/pets`
/** Where a created pet is (`Location`). */
const locationOf = (pet: Pet) => `${PETS_PATH}/${pet.id}`

/** The pets group's registration: `HttpApiBuilder.group(ServedApi, "pets", registerPets)`. */
export const registerPets = (handlers: GroupHandlers<"pets">) =>
  Effect.gen(function*() {
    const repo = yield* PetsRepo
    const idempotency = yield* Idempotency
    const feedPolls = yield* FeedPolls
    const feedEvents = yield* FeedEvents
    return handlers
      // A read in two steps, the page then its headers (no generator: reads are the hot path).
      .handle("listPets", ({ urlParams }) => {
        const limit = urlParams.limit ?? LIMIT_DEFAULT
        return Effect.flatMap(orUnavailable(repo.list({ ...urlParams, limit })), (page) => {
          const position = formatPosition(page.feed.database, page.feed.end)
          // A page filtered by id is the only one (`more` is false): the next page needs no id.
          if (!page.more) return Effect.as(addResponseHeaders({ [FEED_POSITION_HEADER]: position }), page.pets)
          // The next page keeps the limit and the status filter (numbers and a status: nothing to percent-encode).
          const status = urlParams.status === undefined ? "" : `&status=${urlParams.status}`
          const next = `limit=${limit}${status}&after=${page.pets.at(-1)!.id}`
          const headers = { [FEED_POSITION_HEADER]: position, link: `<${PETS_PATH}?${next}>; rel="next"` }
          return Effect.as(addResponseHeaders(headers), page.pets)
        })
      })
      // With an `Idempotency-Key`, scoped to the API key: the pet made now, or the one the key's first create made.
      .handle("createPet", ({ headers, payload }) => {
        const key = headers["idempotency-key"]
        // Without a key, in two steps as the reads are (no generator: plain creates are a hot path too).
        if (key === undefined) {
          return Effect.flatMap(
            orUnavailable(repo.create(payload)),
            (pet) => Effect.as(addResponseHeaders({ location: locationOf(pet) }), pet)
          )
        }
        return Effect.gen(function*() {
          const { id } = yield* CurrentApiKey
          const { _tag, pet } = yield* orUnavailable(idempotency.create(id, key, payload)).pipe(
            Effect.tapErrorTag(
              "IdempotencyKeyInUse",
              () => addResponseHeaders({ "retry-after": String(RETRY_AFTER_IN_USE_SECONDS) })
            )
          )
          const location = locationOf(pet)
          yield* addResponseHeaders(_tag === "Created" ? { location } : { location, "idempotent-replayed": "true" })
          return pet
        })
      })
      // Resumes after a position of this database's feed (at most its end), `start` or `now`; else 410. With
      // `Accept: text/event-stream`, an event stream (`FeedEvents.ts`).
      .handle("listPetChanges", ({ headers, urlParams }) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          if (ServerSentEvents.accepts(request.headers.accept)) {
            // A HEAD is answered a stream's headers at once, and opens none.
            return request.method === "HEAD"
              ? ServerSentEvents.complete()
              : yield* feedEvents.stream(
                headers["last-event-id"] ?? urlParams.after ?? "now",
                urlParams.status,
                request.source as Request
              )
          }
          return yield* feedPolls.poll(urlParams)
        }))
      .handle("getPet", ({ path }) =>
        Effect.flatMap(
          orUnavailable(repo.findById(path.petId)),
          (found) => Option.isNone(found) ? Effect.fail(petNotFound(path.petId)) : Effect.succeed(found.value)
        ))
  })

/** Every answer of getPet, whatever its status, announces the deprecation. */
export const DeprecationLive = Layer.succeed(
  Deprecation,
  addResponseHeaders({
    deprecation: `@${DEPRECATED_SINCE}`,
    sunset: SUNSET,
    link: `<${PETS_PATH}>; rel="successor-version"`
  })
)

/**
 * What the registration needs besides the repository: idempotent creates, the change feed, and the middleware of the
 * group's endpoints.
 */
export const PetsDependencies = Layer.mergeAll(
  Idempotency.Default,
  FeedPolls.Default,
  FeedEvents.Default,
  DeprecationLive
)
