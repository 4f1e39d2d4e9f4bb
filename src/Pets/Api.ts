/**
 * The catalogue's operations, as the interface names them (paths relative to the `/v1` base address).
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, OpenApi } from "@effect/platform"
import { Duration, Schema } from "effect"
import { Authorization } from "../Auth/Api.js"
import {
  BadRequestResponse,
  FeedPositionGoneResponse,
  IdempotencyKeyInUseResponse,
  IdempotencyKeyReusedResponse,
  NotFoundResponse,
  PayloadTooLargeResponse,
  TooManyStreamsResponse,
  UnavailableResponse,
  UnsupportedMediaTypeResponse
} from "../Domain/Errors.js"
import { Changes, ChangesHeaders, ChangesQuery, WAIT_DEFAULT, WAIT_MAX, WAIT_MIN } from "../Domain/Feed.js"
import { CreatePetHeaders } from "../Domain/Idempotency.js"
import { LongPoll } from "../Domain/LongPoll.js"
import { ListPetsQuery, NewPet, Pet, PetIdFromString, Pets } from "../Domain/Pet.js"

/** getPet is removed on this date (RFC 8594 `Sunset`). */
export const SUNSET = "Thu, 05 Dec 2030 00:00:00 GMT"
/** getPet has been deprecated since this instant (RFC 9745 `Deprecation: @<unix seconds>`): 2026-01-01T00:00:00Z. */
export const DEPRECATED_SINCE = 1_767_225_600

/** Adds the deprecation headers to every answer of the endpoint it is on, whatever the outcome. */
export class Deprecation extends HttpApiMiddleware.Tag<Deprecation>()("Pets/Deprecation") {}

export class PetsApi extends HttpApiGroup.make("pets", { topLevel: true })
  .add(
    HttpApiEndpoint.get("listPets", "/pets")
      .setUrlParams(ListPetsQuery)
      .addSuccess(Pets)
      .addError(BadRequestResponse)
      .annotate(OpenApi.Summary, "List animals")
      .annotate(
        OpenApi.Description,
        "Animals in ascending id order, optionally filtered by status, or by id (`?id=42`: the animal, or an empty " +
          "array). When more follow, the response carries `Link: </v1/pets?limit=…&after=…>; rel=\"next\"` " +
          "(keyset pagination; the status filter is kept). `Feed-Position` is where the change feed stood when the page " +
          "was read (`GET /pets/changes?after=…`)."
      )
  )
  .add(
    HttpApiEndpoint.post("createPet", "/pets")
      .setPayload(NewPet)
      .setHeaders(CreatePetHeaders)
      // Annotating a schema drops its identifier; restating it keeps the 201 body a `$ref` to `Pet`, not a copy.
      .addSuccess(Pet.annotations(HttpApiSchema.annotations({ status: 201, identifier: "Pet" })))
      .addError(BadRequestResponse)
      .addError(PayloadTooLargeResponse)
      .addError(UnsupportedMediaTypeResponse)
      .addError(IdempotencyKeyInUseResponse)
      .addError(IdempotencyKeyReusedResponse)
      .annotate(OpenApi.Summary, "Add an animal")
      .annotate(
        OpenApi.Description,
        "Adds an animal; the service assigns its id (a client-sent `id` is ignored). `status` defaults to `available`. " +
          "Send an `Idempotency-Key` to make retries safe: a retry with the same key and body is answered as the " +
          "first request was, with `Idempotent-Replayed: true`, and adds nothing."
      )
  )
  .add(
    HttpApiEndpoint.get("listPetChanges", "/pets/changes")
      .setUrlParams(ChangesQuery)
      .setHeaders(ChangesHeaders)
      .addSuccess(Changes)
      .addError(BadRequestResponse)
      .addError(FeedPositionGoneResponse)
      .addError(TooManyStreamsResponse)
      .annotate(LongPoll, Duration.seconds(WAIT_MAX))
      .annotate(OpenApi.Summary, "Follow the animals added")
      .annotate(
        OpenApi.Description,
        "The change feed: the animals added after `after`, in commit order (the same order on every replica), each " +
          "delivered once, none skipped. `GET /pets` answers its `Feed-Position`: list, then follow from there.\n\n" +
          "With `Accept: text/event-stream`, Server-Sent Events: an event `created` per animal (`id:` its " +
          "position, `data:` the animal), an id-only event for one a `status` filter passes over, a comment every " +
          "5 seconds; `EventSource` resumes by itself (`Last-Event-ID`). A position the feed cannot " +
          "resume from is an `event: reset` (data: the 410 error), then the stream ends.\n\n" +
          "Otherwise a long poll: a page answered as soon as an animal is there, or empty after `wait` seconds " +
          `in all (default ${WAIT_DEFAULT}, at most ${WAIT_MAX}, ${WAIT_MIN}: at once); resume with the page's ` +
          "`next`. A position the feed cannot resume from is a 410 `feed_position_gone`."
      )
  )
  .add(
    HttpApiEndpoint.get("getPet", "/pets/:petId")
      .setPath(Schema.Struct({ petId: PetIdFromString }))
      .addSuccess(Pet)
      .addError(BadRequestResponse)
      .addError(NotFoundResponse)
      .annotate(OpenApi.Summary, "Get an animal (deprecated)")
      .annotate(
        OpenApi.Description,
        "Deprecated: removed on 5 December 2030. Use `GET /pets?id=…` instead: an array of the animal, or empty."
      )
      .annotate(OpenApi.Deprecated, true)
      .middleware(Deprecation)
  )
  .addError(UnavailableResponse)
  .middleware(Authorization)
  .annotate(OpenApi.Title, "pets")
  .annotate(OpenApi.Description, "The catalogue of animals.")
{}
