/**
 * The reference the engine is compared with: the library's own server (`HttpApiBuilder.toWebHandler`) on the same
 * declaration and the same registration (`HttpApiBuilder.group(ServedApi, "pets", registerPets)`). It answers what
 * `HttpApiBuilder` defines — statuses, successes, declared errors, the headers handlers and middleware add — and none
 * of what the server adds around it (the gates, `{code, message, status}` bodies for a failed decode, request ids).
 */
import { type HttpApi, HttpApiBuilder, HttpServer } from "@effect/platform"
import { Effect, Layer } from "effect"
import { ServedApi } from "../../src/Api.js"
import { AuthorizationLive } from "../../src/Auth/Http.js"
import { Lifecycle } from "../../src/Operations/Lifecycle.js"
import { PetsDependencies, registerPets } from "../../src/Pets/Http.js"
import { withResponseHeaders } from "../../src/ResponseHeaders.js"

/** The library's server of an `HttpApi` layer, with the headers handlers add (`ResponseHeaders.ts`), disposed with the scope. */
export const referenceServer = <E>(api: Layer.Layer<HttpApi.Api, E>) =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() =>
        HttpApiBuilder.toWebHandler(Layer.mergeAll(api, HttpServer.layerContext), { middleware: withResponseHeaders })
      ),
      ({ dispose }) => Effect.promise(dispose)
    ),
    ({ handler }) => (request: Request) => handler(request)
  )

/** petstore's API as the library serves it, given the repositories, the API keys and the SQL client. */
export const PetstoreReference = HttpApiBuilder.api(ServedApi).pipe(
  Layer.provide(HttpApiBuilder.group(ServedApi, "pets", registerPets)),
  Layer.provide([PetsDependencies, AuthorizationLive]),
  Layer.provide(Lifecycle.Default)
)

/** What the server adds around what `HttpApiBuilder` defines, left out of a comparison. */
const SERVER_HEADERS = new Set(["x-request-id", "x-content-type-options", "cache-control", "date", "content-length"])

/**
 * The codes of the server's own refusals, made before any endpoint runs (the gates, the route table): `HttpApiBuilder`
 * defines no answer for them.
 */
export const SERVER_REFUSALS: ReadonlySet<string> = new Set([
  "not_found",
  "method_not_allowed",
  "payload_too_large",
  "unsupported_media_type",
  "invalid_json",
  "bad_request",
  "uri_too_long",
  "header_too_large"
])

/** Status, body and the headers handlers and middleware add: what the engine and the reference must agree on. */
export const comparable = async (response: Response) => ({
  status: response.status,
  headers: Object.fromEntries([...response.headers].filter(([name]) => !SERVER_HEADERS.has(name))),
  body: await response.text()
})
