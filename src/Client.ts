/**
 * A typed client of the petstore API, derived from its declaration (`Api.ts`). It needs only `effect` and
 * `@effect/platform` (this module and the declarations it imports use nothing else), and an `HttpClient`
 * (`FetchHttpClient.layer` in a browser, Node or Bun). The README shows it at work; `changes` follows the feed
 * (`ClientFeed.ts`).
 */
import { HttpApiClient, type HttpApiError, HttpClient, HttpClientError, HttpClientRequest } from "@effect/platform"
import { Effect, Option, type ParseResult, Redacted, Schema, Stream } from "effect"
import { Api } from "./Api.js"
import { type Change, type ChangesError, type ChangesOptions, makeChanges } from "./ClientFeed.js"
import type * as Errors from "./Domain/Errors.js"
import { FEED_POSITION_HEADER } from "./Domain/Feed.js"
import { ListPetsQuery, NewPet, type Pet, PetId, type PetStatus } from "./Domain/Pet.js"

export type { Change, ChangesError, ChangesOptions, Pet, PetStatus }

/** A new pet as the wire takes it: `status` may be left out (`available`); the name is trimmed by the service. */
export type NewPetInput = typeof NewPet.Encoded

/** The query of `listPets`: plain numbers (the schemas check them before anything is sent). */
export interface ListQuery {
  /** Only the pet with this id: what `getPet` answers, as a page of it or an empty one. */
  readonly id?: number | undefined
  readonly limit?: number | undefined
  readonly status?: PetStatus | undefined
  readonly after?: number | undefined
}

/**
 * A page of pets, the query of the next page when more follow (from the `Link: rel="next"` header), and where the
 * change feed stood when the page was read (`Feed-Position`): `changes({ after: position })` follows on from the list.
 */
export interface Page {
  readonly pets: ReadonlyArray<Pet>
  readonly next: Option.Option<ListQuery>
  readonly position: Option.Option<string>
}

/** What a call may fail with: the service's typed errors, a transport failure, or a value the schemas refuse. */
export type PetstoreError =
  | Errors.BadRequest
  | Errors.Unauthorized
  | Errors.NotFound
  | Errors.PayloadTooLarge
  | Errors.UnsupportedMediaType
  | Errors.IdempotencyKeyInUse
  | Errors.IdempotencyKeyReused
  | Errors.FeedPositionGone
  | Errors.RateLimited
  | Errors.Unavailable
  | HttpApiError.HttpApiDecodeError
  | HttpClientError.HttpClientError
  | ParseResult.ParseError

export interface PetstoreClient {
  readonly listPets: (query?: ListQuery) => Effect.Effect<Page, PetstoreError>
  /**
   * With an `idempotencyKey` (1 to 255 visible ASCII characters, e.g. a UUID), a retry of the same create with the same
   * key is answered as the first was and adds nothing.
   */
  readonly createPet: (pet: NewPetInput, options?: CreateOptions) => Effect.Effect<Pet, PetstoreError>
  /** Deprecated by the service (removed on 5 December 2030): use `listPets({ id })`. */
  readonly getPet: (petId: number) => Effect.Effect<Pet, PetstoreError>
  /** Every pet the query selects, page after page, following `Link: rel="next"` until the last. */
  readonly allPets: (query?: Omit<ListQuery, "after">) => Stream.Stream<Pet, PetstoreError>
  /**
   * The pets added, in the feed's order, each once, without end: it polls on from each page's `next`, and sends a poll
   * that failed in transit, or was answered 408, 429, 500, 502, 503 or 504, again with backoff (never before its
   * `Retry-After`). It fails with what retrying cannot mend: `Unauthorized`, `FeedPositionGone`, `BadRequest`, a body
   * the schemas refuse, an answer the API does not declare.
   */
  readonly changes: (options?: ChangesOptions) => Stream.Stream<Change, ChangesError>
}

export interface CreateOptions {
  readonly idempotencyKey?: string | undefined
}

export interface ClientOptions {
  /** The API's base address, with its version segment: `https://api.petstore.example/v1`. */
  readonly baseUrl: string
  /** An API key (`petstore keys create`), sent as `Authorization: Bearer <API_KEY>`. */
  readonly apiKey: string | Redacted.Redacted<string>
}

const decodeQuery = Schema.decodeUnknown(Schema.typeSchema(ListPetsQuery))
const decodeWireQuery = Schema.decodeUnknown(ListPetsQuery)

/** The query of the page a `Link` header's `rel="next"` points to, if there is one. */
export const nextQuery = (
  link: string | undefined
): Effect.Effect<Option.Option<ListQuery>, ParseResult.ParseError> => {
  const target = /<([^>]*)>\s*;\s*rel="?next"?/.exec(link ?? "")?.[1]
  if (target === undefined) return Effect.succeedNone
  // `forEach`, not iteration: the DOM library without DOM.Iterable knows no iterator of URLSearchParams.
  const params: Record<string, string> = {}
  new URL(target, "http://link.invalid").searchParams.forEach((value, name) => params[name] = value)
  return Effect.map(decodeWireQuery(params), Option.some)
}

/** What the runtime's error codes say of a request that met no answer. */
const TRANSPORT_CAUSES: Record<string, string> = {
  ECONNREFUSED: "connection refused: is petstore running at that address?",
  ENOTFOUND: "name not resolved: is the host right?",
  EAI_AGAIN: "name not resolved: is the host right?",
  ETIMEDOUT: "timed out",
  UND_ERR_CONNECT_TIMEOUT: "timed out",
  ECONNRESET: "connection reset"
}

/**
 * A transport failure named by its cause; its message adds the method and URL (`Transport: connection refused: … (GET
 * http://localhost:8080/v1/pets)`). Every call, the feed's polls included, goes through it.
 */
const namedTransportError = (error: HttpClientError.HttpClientError): HttpClientError.HttpClientError => {
  if (error._tag !== "RequestError" || error.reason !== "Transport") return error
  const cause = error.cause as { readonly code?: unknown; readonly name?: unknown; readonly message?: unknown }
  const named = (typeof cause?.code === "string" ? TRANSPORT_CAUSES[cause.code] : undefined) ??
    (cause?.name === "TimeoutError" ? "timed out" : undefined) ??
    (typeof cause?.message === "string" ? cause.message : undefined)
  if (named === undefined) return error
  return new HttpClientError.RequestError({ request: error.request, reason: error.reason, cause, description: named })
}

/** A client of the service at `baseUrl`, sending `apiKey` with every request. */
export const makeClient = (options: ClientOptions): Effect.Effect<PetstoreClient, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const httpClient = HttpClient.mapRequest(
      HttpClient.transformResponse(yield* HttpClient.HttpClient, Effect.mapError(namedTransportError)),
      HttpClientRequest.bearerToken(options.apiKey)
    )
    const client = yield* HttpApiClient.makeWith(Api, { httpClient, baseUrl: options.baseUrl })

    const listPets = (query: ListQuery = {}) =>
      Effect.gen(function*() {
        const urlParams = yield* decodeQuery(query)
        const [pets, response] = yield* client.listPets({ urlParams, withResponse: true })
        return {
          pets,
          next: yield* nextQuery(response.headers.link),
          position: Option.fromNullable(response.headers[FEED_POSITION_HEADER.toLowerCase()])
        }
      })

    const createPet = (pet: NewPetInput, options: CreateOptions = {}) =>
      Effect.flatMap(Schema.decodeUnknown(NewPet)(pet), (payload) =>
        client.createPet({
          payload,
          headers: options.idempotencyKey === undefined ? {} : { "idempotency-key": options.idempotencyKey }
        }))

    return {
      listPets,
      createPet,
      getPet: (petId) =>
        Effect.flatMap(Schema.decodeUnknown(PetId)(petId), (petId) => client.getPet({ path: { petId } })),
      allPets: (query = {}) =>
        Stream.paginateEffect(
          query as ListQuery,
          (query) => Effect.map(listPets(query), (page) => [page.pets, page.next] as const)
        ).pipe(Stream.flattenIterables),
      changes: yield* makeChanges(httpClient, options.baseUrl)
    } satisfies PetstoreClient
  })
