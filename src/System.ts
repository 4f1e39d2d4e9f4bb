/**
 * The server's own routes, outside the versioned API: liveness, readiness, the OpenAPI document and its docs page, and
 * an empty answer to a browser's `/favicon.ico`.
 */
import {
  HttpApi,
  HttpApiBuilder,
  type HttpApiGroup,
  HttpRouter,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import type * as HttpApiScalar from "@effect/platform/HttpApiScalar"
import { SqlClient } from "@effect/sql"
import { Chunk, Context, Effect, Layer } from "effect"
import { createHash } from "node:crypto"
import { brotliCompressSync, constants as zlib, gzipSync } from "node:zlib"
import { documentedApi, openApiDocument, type Servers } from "./Api.js"
import { errorBody } from "./Domain/Errors.js"
import { Lifecycle } from "./Operations/Lifecycle.js"
import { UNAVAILABLE_HEADERS } from "./Unavailable.js"

const unavailable = (message: string) =>
  HttpServerResponse.unsafeJson(errorBody(503, "unavailable", message), { status: 503, headers: UNAVAILABLE_HEADERS })

const READY_TIMEOUT = "2 seconds"

/** A browser asks for `/favicon.ico` with every page it opens: the server has none, and may be kept knowing it. */
export const FAVICON_CACHE_CONTROL = "public, max-age=86400"

export const SystemRoutesLive = (servers: Servers) =>
  HttpRouter.Default.use((router) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const lifecycle = yield* Lifecycle
      const ok = HttpServerResponse.unsafeJson({ status: "ok" })

      /** Ready while serving and while the database answers (a read of the catalogue) within READY_TIMEOUT. */
      const readiness = Effect.if(lifecycle.draining, {
        onTrue: () => Effect.succeed(unavailable("The server is shutting down.")),
        onFalse: () =>
          sql`SELECT 1 FROM pets LIMIT 1`.pipe(
            // The answer does not wait for an unanswered query to be cancelled: that happens in the background.
            Effect.disconnect,
            Effect.timeout(READY_TIMEOUT),
            Effect.as(ok),
            Effect.catchAll((error) =>
              Effect.as(
                Effect.logWarning("readiness check failed", error),
                unavailable("The database does not answer.")
              )
            )
          )
      })

      // A person who opens the server's address in a browser lands on its reference.
      yield* router.get("/", Effect.succeed(HttpServerResponse.redirect("/docs", { status: 302 })))
      yield* router.get("/healthz", Effect.succeed(ok))
      yield* router.get("/readyz", readiness)
      yield* router.get(
        "/favicon.ico",
        Effect.succeed(
          HttpServerResponse.empty({ status: 204 }).pipe(
            HttpServerResponse.setHeader("cache-control", FAVICON_CACHE_CONTROL)
          )
        )
      )
      // Generated on first request (not at start-up), then served as is.
      const document = yield* Effect.cached(Effect.sync(() => HttpServerResponse.unsafeJson(openApiDocument(servers))))
      yield* router.get("/openapi.json", document)
    })
  )

/**
 * The interactive reference, Scalar, served whole by the executable. The page (some 3 MB) and the module that makes it
 * are loaded on its first request, not at start-up; it is sent compressed when the browser accepts it, and unlike the
 * API's answers it may be kept and reused (`DOCS_CACHE_CONTROL`, an ETag per encoding).
 */
export const DocsLive = (servers: Servers) =>
  HttpRouter.Default.use((router) =>
    Effect.gen(function*() {
      const page = yield* Effect.cached(Effect.map(docsPage(servers), docsVariants))
      yield* router.get("/docs", Effect.zipWith(page, HttpServerRequest.HttpServerRequest, answerDocs))
    })
  )

/**
 * Scalar's settings: no fonts from another host; the bearer scheme selected, so that a key pasted once is sent with
 * every "Test Request" (`authentication` is Scalar's, not in `ScalarConfig`'s type).
 */
const SCALAR_CONFIG = {
  withDefaultFonts: false,
  authentication: { preferredSecurityScheme: "bearerAuth" }
} as HttpApiScalar.ScalarConfig

/** The page HttpApiScalar's `/docs` route answers, the route built on a router of its own. */
const docsPage = (servers: Servers) =>
  Effect.gen(function*() {
    const HttpApiScalar = yield* Effect.promise(() => import("@effect/platform/HttpApiScalar"))
    const api = documentedApi(servers) as unknown as HttpApi.HttpApi<string, HttpApiGroup.HttpApiGroup.AnyWithProps>
    const docs = yield* Effect.provide(
      HttpApiBuilder.Router.router,
      HttpApiScalar.layer({ path: "/docs", scalar: SCALAR_CONFIG }).pipe(
        Layer.provide(Layer.succeed(HttpApi.Api, { api, context: Context.empty() })),
        Layer.provideMerge(HttpApiBuilder.Router.Live)
      )
    )
    const route = yield* Effect.orDie(Chunk.findFirst(docs.routes, (route) => route.path === "/docs"))
    const response = yield* (route.handler as Effect.Effect<HttpServerResponse.HttpServerResponse>)
    if (response.body._tag !== "Uint8Array") return yield* Effect.dieMessage("HttpApiScalar's page is not bytes")
    return response.body.body
  })

/** The docs page may be kept for five minutes, then revalidated with its ETag (a 304 when unchanged). */
export const DOCS_CACHE_CONTROL = "public, max-age=300"

/** The page in each encoding, each with its own strong validator (a different body is a different representation). */
const docsVariants = (html: Uint8Array) => {
  const hash = createHash("sha256").update(html).digest("base64url").slice(0, 22)
  return {
    identity: { body: html, etag: `"${hash}"` },
    gzip: { body: gzipSync(html), etag: `"${hash}-gzip"` },
    br: { body: brotliCompressSync(html, { params: { [zlib.BROTLI_PARAM_QUALITY]: 5 } }), etag: `"${hash}-br"` }
  }
}

/** The best encoding the request accepts (`Accept-Encoding`, `q=0` meaning no): Brotli, then gzip, else none. */
export const chooseEncoding = (acceptEncoding: string | undefined): "br" | "gzip" | "identity" => {
  const accepted = new Set<string>()
  for (const item of (acceptEncoding ?? "").toLowerCase().split(",")) {
    const [name, ...params] = item.split(";").map((part) => part.trim())
    const q = params.find((param) => param.startsWith("q="))
    if (name !== "" && (q === undefined || Number(q.slice(2)) > 0)) accepted.add(name)
  }
  return accepted.has("br") ? "br" : accepted.has("gzip") || accepted.has("*") ? "gzip" : "identity"
}

/** The page as the request wants it: compressed if it may be, a 304 if the browser's copy is current. */
const answerDocs = (variants: ReturnType<typeof docsVariants>, request: HttpServerRequest.HttpServerRequest) => {
  const encoding = chooseEncoding(request.headers["accept-encoding"])
  const { body, etag } = variants[encoding]
  const headers = {
    "cache-control": DOCS_CACHE_CONTROL,
    etag,
    vary: "Accept-Encoding",
    ...(encoding === "identity" ? {} : { "content-encoding": encoding })
  }
  const known = (request.headers["if-none-match"] ?? "").split(",").map((tag) => tag.trim().replace(/^W\//, ""))
  return known.includes(etag) || known.includes("*")
    ? HttpServerResponse.empty({ status: 304, headers })
    : HttpServerResponse.uint8Array(body, { contentType: "text/html; charset=utf-8", headers })
}
