/**
 * The petstore API, declared once. The OpenAPI document, the docs page, the server and the typed client all derive
 * from it; this module imports no implementation, so a client can import it alone:
 *
 *     const client = yield* HttpApiClient.make(Api, { baseUrl: "https://api.petstore.example/v1" })
 */
import { HttpApi, OpenApi } from "@effect/platform"
import { RATE_LIMIT_HEADER_DOCS, RETRY_AFTER_HEADER_DOCS } from "./Auth/Api.js"
import { PetsApi } from "./Pets/Api.js"

type Document = {
  info: Record<string, unknown>
  paths: Record<
    string,
    Record<string, {
      security?: ReadonlyArray<unknown>
      responses?: Record<string, { description: string; content?: unknown; headers?: object }>
    }>
  >
  components: { schemas: Record<string, unknown> }
}

/**
 * The server answers every failure (a failed decode included) with an `Error` body, so every error response of the
 * document refers to that one schema and the generic decode-error schemas are left out.
 */
const finishDocument = (doc: Document): Record<string, any> => {
  for (const item of Object.values(doc.paths)) {
    for (const op of Object.values(item)) {
      for (const [status, response] of Object.entries(op.responses ?? {})) {
        if (op.security !== undefined && op.security.length > 0 && status !== "401") {
          response.headers = { ...response.headers, ...RATE_LIMIT_HEADER_DOCS }
        }
        if (status === "429" || status === "503") response.headers = { ...response.headers, ...RETRY_AFTER_HEADER_DOCS }
        if (Number(status) < 400 || response.content === undefined) continue
        response.content = { "application/json": { schema: { $ref: "#/components/schemas/Error" } } }
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

/** The API annotated with the base addresses of the deployments: the source of `/openapi.json` and `/docs`. */
export const documentedApi = (servers: Servers) =>
  Api.annotate(OpenApi.Servers, [
    { url: servers.production, description: "Production deployment" },
    { url: servers.staging, description: "Staging deployment" }
  ])

/** The OpenAPI document for the given deployments. */
export const openApiDocument = (servers: Servers): OpenApi.OpenAPISpec => OpenApi.fromApi(documentedApi(servers))
