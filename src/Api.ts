/**
 * The petstore API, declared once. The OpenAPI document, the docs page, the server and the typed client (`Client.ts`)
 * all derive from it; it and the declarations it imports need only `effect` and `@effect/platform`.
 */
import { HttpApi, OpenApi } from "@effect/platform"
import { RATE_LIMIT_HEADER_DOCS, RETRY_AFTER_HEADER_DOCS } from "./Auth/Api.js"
import { idempotencyKeyInUse, idempotencyKeyReused, rateLimited } from "./Domain/Errors.js"
import { EXAMPLES as PET_EXAMPLES } from "./Domain/Pet.js"
import { PetsApi } from "./Pets/Api.js"

type Content = Record<string, { schema?: unknown; example?: unknown }>

type Document = {
  info: Record<string, unknown>
  security?: ReadonlyArray<Record<string, ReadonlyArray<string>>>
  paths: Record<
    string,
    Record<string, {
      operationId: string
      security?: ReadonlyArray<unknown>
      requestBody?: { content?: Content }
      responses?: Record<string, { description: string; content?: Content; headers?: object }>
    }>
  >
  components: { schemas: Record<string, unknown> }
}

/** The example of an error the service makes with one of the typed errors' constructors. */
const errorExample = (error: { readonly code: string; readonly message: string }) => ({
  code: error.code,
  message: error.message
})

/**
 * An example of each body, as the service sends it (or accepts it), so that the docs page's requests work as they
 * are and its answers read like real ones. `test/OpenApi.test.ts` sends the requests to the service.
 */
const EXAMPLES: Record<string, { request?: unknown; responses: Record<string, unknown> }> = {
  listPets: {
    responses: {
      200: PET_EXAMPLES.pets,
      400: { code: "invalid_query", message: "Invalid query parameter 'limit': must be an integer from 1 to 100" }
    }
  },
  createPet: {
    request: PET_EXAMPLES.newPet,
    responses: {
      201: PET_EXAMPLES.pet,
      400: {
        code: "invalid_body",
        message: "Invalid request body: 'name' is invalid: must be a string of 1 to 200 characters without control " +
          "characters, surrounding white space not counted"
      },
      413: { code: "payload_too_large", message: "The request body is over 65536 bytes." },
      415: {
        code: "unsupported_media_type",
        message: "The request body must be sent as application/json (UTF-8), and say so in its Content-Type."
      },
      409: errorExample(idempotencyKeyInUse()),
      422: errorExample(idempotencyKeyReused())
    }
  },
  getPet: {
    responses: {
      200: PET_EXAMPLES.pet,
      400: { code: "invalid_path", message: "Invalid path parameter 'petId': must be a positive integer" },
      404: { code: "not_found", message: "No pet has the id 42." }
    }
  }
}

/** Examples of the errors every operation may answer. */
const COMMON_ERRORS: Record<string, unknown> = {
  401: { code: "unauthorized", message: "A valid API key is required: send it as 'Authorization: Bearer <API_KEY>'." },
  429: errorExample(rateLimited(17)),
  503: { code: "unavailable", message: "The service cannot reach its database; try again shortly." }
}

const withStatus = (status: string, example: unknown) =>
  Number(status) >= 400 ? { ...(example as object), status: Number(status) } : example

/**
 * The server answers every failure (a failed decode included) with an `Error` body, so every error response of the
 * document refers to that one schema and the generic decode-error schemas are left out. Every body gets its example,
 * and the bearer scheme is the document's default, so that a docs page preselects it.
 */
const finishDocument = (doc: Document): Record<string, any> => {
  doc.security = [{ bearerAuth: [] }]
  for (const item of Object.values(doc.paths)) {
    for (const op of Object.values(item)) {
      const examples = EXAMPLES[op.operationId]
      const requestBody = op.requestBody?.content?.["application/json"]
      if (requestBody !== undefined && examples?.request !== undefined) requestBody.example = examples.request
      for (const [status, response] of Object.entries(op.responses ?? {})) {
        // With `RATE_LIMIT` set, every answer to an authenticated request states the quota.
        if (op.security !== undefined && op.security.length > 0 && status !== "401") {
          response.headers = { ...response.headers, ...RATE_LIMIT_HEADER_DOCS }
        }
        if (status === "429" || status === "503") response.headers = { ...response.headers, ...RETRY_AFTER_HEADER_DOCS }
        const example = examples?.responses[status] ?? COMMON_ERRORS[status]
        if (Number(status) < 400) {
          const body = response.content?.["application/json"]
          if (body !== undefined && example !== undefined) body.example = example
          continue
        }
        if (response.content === undefined) continue
        response.content = {
          "application/json": {
            schema: { $ref: "#/components/schemas/Error" },
            ...(example === undefined ? {} : { example: withStatus(status, example) })
          }
        }
        if (status === "400") response.description = "The request is invalid: the message names the field and why."
        if (status === "401") {
          response.headers = {
            ...response.headers,
            "WWW-Authenticate": {
              description: "RFC 6750: `Bearer`, the scheme to authenticate with.",
              schema: { type: "string" }
            }
          }
        }
      }
    }
  }
  for (const name of ["HttpApiDecodeError", "Issue", "PropertyKey"]) delete doc.components.schemas[name]
  // Unknown fields of a new pet are ignored, not refused.
  delete (doc.components.schemas.NewPet as { additionalProperties?: boolean }).additionalProperties
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
    "A catalogue of animals: list them, add them, and (deprecated) fetch one. Every operation needs an API key, " +
      "sent as a bearer token. Every error is an `Error` object whose `status` equals the HTTP status."
  )
  .annotate(OpenApi.Transform, (spec) => finishDocument(spec as unknown as Document))
{}

/** The API as the server mounts it: the same endpoints under `/v1`. */
export const ServedApi = Api.prefix(BASE_PATH)

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
