/**
 * The petstore API, declared once. The OpenAPI document, the docs page, the server and the typed client (`Client.ts`)
 * all derive from it; it and the declarations it imports need only `effect` and `@effect/platform`.
 */
import { HttpApi, type HttpApiBuilder, type HttpApiGroup, OpenApi } from "@effect/platform"
import {
  feedPositionGone,
  idempotencyKeyInUse,
  idempotencyKeyReused,
  payloadTooLarge,
  petNotFound,
  rateLimited,
  unauthorized,
  unavailable,
  unsupportedMediaType
} from "./Domain/Errors.js"
import { FEED_POSITION_HEADER, LAST_EVENT_ID_HEADER } from "./Domain/Feed.js"
import { IDEMPOTENCY_KEY_HEADER } from "./Domain/Idempotency.js"
import { PetsApi, SUNSET } from "./Pets/Api.js"
import * as ServerSentEvents from "./ServerSentEvents.js"

/** Response headers, which HttpApi has no declaration for, by operation and status (`*`: every response). */
const HEADERS: Record<string, Record<string, Record<string, string>>> = {
  listPets: {
    200: {
      Link: "RFC 8288 link to the next page (`rel=\"next\"`), present when more animals follow.",
      [FEED_POSITION_HEADER]:
        "The change feed's position when the page was read: follow the animals added since with " +
        "`GET /pets/changes?after=<Feed-Position>`."
    }
  },
  createPet: {
    201: {
      Location: "The new animal's address, `/v1/pets/{id}`.",
      "Idempotent-Replayed": "`true` when this is the recorded answer to an earlier request with the same " +
        "`Idempotency-Key` (no animal was added this time)."
    }
  },
  getPet: {
    "*": {
      Deprecation: "RFC 9745: `@<unix seconds>`, when the operation was deprecated.",
      Sunset: `RFC 8594: the operation is removed on ${SUNSET}.`,
      Link: "`</v1/pets>; rel=\"successor-version\"`: the operation to use instead."
    }
  }
}
/** The request headers HttpApi declares, by their lower-case name, as the document spells them. */
const HEADER_SPELLING: Record<string, string> = Object.fromEntries(
  [IDEMPOTENCY_KEY_HEADER, LAST_EVENT_ID_HEADER].map((name) => [name.toLowerCase(), name])
)

/** The operations that answer Server-Sent Events to `Accept: text/event-stream`: their 200's event stream. */
const EVENT_STREAMS: Record<string, { readonly schema: unknown; readonly example: string }> = {
  listPetChanges: {
    schema: {
      type: "string",
      description: "Server-Sent Events: `retry:`, then per animal added `id: <position>`, `event: created`, " +
        "`data: <Pet>`; `id: <position>` alone for one the `status` filter passes over; `: heartbeat` comments; " +
        "`event: reset` (data: the 410 `Error`) for a position the feed cannot resume from, `event: error` (data: an " +
        "`Error`: `slow_consumer`, `unauthorized` once the key is revoked, `unavailable`) before the stream ends."
    },
    example: "retry: 2000\n\nid: 4f2a9c01d3b7e865.42\nevent: created\n" +
      "data: {\"id\":42,\"name\":\"Rex\",\"categoryId\":1,\"status\":\"available\"}\n\n"
  }
}

/** With `RATE_LIMIT` set, every answer to an authenticated request states the quota. */
const RATE_LIMIT_HEADERS = {
  "RateLimit-Policy": "With `RATE_LIMIT` set: the API key's quota, `\"default\";q=<requests>;w=<window in seconds>` " +
    "(draft-ietf-httpapi-ratelimit-headers-10).",
  RateLimit: "With `RATE_LIMIT` set: what is left of the quota, `\"default\";r=<requests left>;t=<seconds until " +
    "all of the quota is back>`."
}
const RETRY_AFTER_HEADER = { "Retry-After": "RFC 9110: seconds to wait before retrying." }
const CHALLENGE_HEADER = { "WWW-Authenticate": "RFC 6750: `Bearer`, the scheme to authenticate with." }

/** Every response header the document describes, in lower case: what a browser client may read (CORS). */
export const DOCUMENTED_RESPONSE_HEADERS: ReadonlyArray<string> = [
  ...new Set(
    [
      ...Object.values(HEADERS).flatMap((byStatus) => Object.values(byStatus).flatMap(Object.keys)),
      ...Object.keys(RATE_LIMIT_HEADERS),
      ...Object.keys(RETRY_AFTER_HEADER),
      ...Object.keys(CHALLENGE_HEADER)
    ].map((name) => name.toLowerCase())
  )
]

/** An example of each error an operation answers, as the service answers it, by operation (`*`: all) and status. */
const EXAMPLES: Record<string, Record<string, { readonly code: string; readonly message: string }>> = {
  "*": { 401: unauthorized(), 429: rateLimited(17), 503: unavailable() },
  listPets: {
    400: { code: "invalid_query", message: "Invalid query parameter 'limit': must be an integer from 1 to 100" }
  },
  createPet: {
    400: {
      code: "invalid_body",
      message: "Invalid request body: 'name' is invalid: must be a string of 1 to 200 characters without control " +
        "characters, surrounding white space not counted"
    },
    409: idempotencyKeyInUse(),
    413: payloadTooLarge(),
    415: unsupportedMediaType(),
    422: idempotencyKeyReused()
  },
  listPetChanges: {
    400: { code: "invalid_query", message: "Invalid query parameter 'wait': must be an integer from 0 to 25" },
    410: feedPositionGone()
  },
  getPet: {
    400: { code: "invalid_path", message: "Invalid path parameter 'petId': must be a positive integer" },
    404: petNotFound(42)
  }
}

/**
 * The server answers every failure (a failed decode included) with an `Error` body, so every error response of the
 * document refers to that one schema and the generic decode-error schemas are left out. Every body gets its example
 * (a request or success body its schema's, so that the docs page's requests work as they are), and the bearer scheme
 * is the document's default, so that a docs page preselects it.
 */
const finishDocument = (doc: Record<string, any>) => {
  const withExample = (content: any) => {
    const example = doc.components.schemas[content?.schema?.$ref?.split("/").at(-1)]?.examples?.[0]
    if (example !== undefined) content.example = example
  }
  doc.security = [{ bearerAuth: [] }]
  for (const item of Object.values<Record<string, any>>(doc.paths)) {
    for (const op of Object.values<any>(item)) {
      const id: string = op.operationId
      // HttpApi declares header parameters in lower case, as requests carry them; the document spells them as usual.
      for (const parameter of op.parameters ?? []) {
        if (parameter.in === "header") parameter.name = HEADER_SPELLING[parameter.name] ?? parameter.name
      }
      if (EVENT_STREAMS[id] !== undefined) {
        op.responses["200"].content[ServerSentEvents.CONTENT_TYPE] = EVENT_STREAMS[id]
      }
      withExample(op.requestBody?.content?.["application/json"])
      for (const [status, response] of Object.entries<any>(op.responses ?? {})) {
        const headers = {
          ...HEADERS[id]?.["*"],
          ...HEADERS[id]?.[status],
          ...(op.security?.length > 0 && status !== "401" ? RATE_LIMIT_HEADERS : {}),
          ...(status === "409" || status === "429" || status === "503" ? RETRY_AFTER_HEADER : {}),
          ...(status === "401" ? CHALLENGE_HEADER : {})
        }
        response.headers = Object.fromEntries(
          Object.entries(headers).map(([name, description]) => [
            name,
            { description, schema: { type: name === "Retry-After" ? "integer" : "string" } }
          ])
        )
        if (Number(status) < 400) {
          withExample(response.content?.["application/json"])
        } else if (response.content !== undefined) {
          const { code, message } = EXAMPLES[id]?.[status] ?? EXAMPLES["*"][status]
          response.content = {
            "application/json": {
              schema: { $ref: "#/components/schemas/Error" },
              example: { code, message, status: Number(status) }
            }
          }
          if (status === "400") response.description = "The request is invalid: the message names the field and why."
        }
      }
    }
  }
  for (const name of ["HttpApiDecodeError", "Issue", "PropertyKey"]) delete doc.components.schemas[name]
  // Unknown fields of a new pet are ignored, not refused.
  delete doc.components.schemas.NewPet.additionalProperties
  doc.info.contact = { name: "petstore operators", url: "https://api.petstore.example/docs" }
  doc.info.license = { name: "Proprietary", identifier: "LicenseRef-Proprietary" }
  return doc
}

/** The version segment every base address ends in; the server serves `Api` under it. */
export const BASE_PATH = "/v1"

export class Api extends HttpApi.make("petstore")
  .add(PetsApi)
  .annotate(OpenApi.Title, "Pet Store")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(
    OpenApi.Description,
    "A catalogue of animals: list them, add them, follow the animals added, and (deprecated) fetch one. Every operation needs an API key, " +
      "sent as a bearer token. Every error is an `Error` object whose `status` equals the HTTP status."
  )
  .annotate(OpenApi.Transform, finishDocument)
{}

/** The API as the server mounts it: the same endpoints under `/v1`. */
export const ServedApi = Api.prefix(BASE_PATH)

/** What a group's registration is handed: `HttpApiBuilder.group(ServedApi, name, (handlers) => …)`'s `handlers`. */
export type GroupHandlers<Name extends string> = typeof ServedApi extends
  HttpApi.HttpApi<infer _, infer G, infer E, infer R>
  ? HttpApiBuilder.Handlers.FromGroup<E, R, HttpApiGroup.HttpApiGroup.WithName<G, Name>>
  : never

export interface Servers {
  readonly production: string
  readonly staging: string
}

/**
 * The API annotated with the base addresses: first the server the document is read from (a relative `/v1`, so the
 * docs page's requests go where the page came from), then the deployments. The source of `/openapi.json` and `/docs`.
 */
export const documentedApi = (servers: Servers) =>
  Api.annotate(OpenApi.Servers, [
    { url: BASE_PATH, description: "This server" },
    { url: servers.production, description: "Production deployment" },
    { url: servers.staging, description: "Staging deployment" }
  ])

/** The OpenAPI document for the given deployments. */
export const openApiDocument = (servers: Servers): OpenApi.OpenAPISpec => OpenApi.fromApi(documentedApi(servers))
