/**
 * The server's own routes, outside the versioned API: liveness, readiness, the OpenAPI document and its docs page.
 */
import { HttpApi, HttpApiBuilder, type HttpApiGroup, HttpServerResponse } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Chunk, Context, Effect, Layer, Option } from "effect"
import { documentedApi, openApiDocument, type Servers } from "./Api.js"
import { Lifecycle } from "./Lifecycle.js"
import { errorBody } from "./Domain/Errors.js"

const unavailable = (message: string) =>
  HttpServerResponse.unsafeJson(errorBody(503, "unavailable", message), { status: 503 })

const READY_TIMEOUT = "2 seconds"

export const SystemRoutesLive = (servers: Servers) =>
  HttpApiBuilder.Router.use((router) =>
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

      yield* router.get("/healthz", Effect.succeed(ok))
      yield* router.get("/readyz", readiness)
      // Generated on first request (not at start-up), then served as is.
      const document = yield* Effect.cached(Effect.sync(() => HttpServerResponse.unsafeJson(openApiDocument(servers))))
      yield* router.get("/openapi.json", document)
    })
  )

/**
 * The interactive reference, Scalar, served whole by the executable (no font or script from another host). The page
 * (some 3 MB, with the OpenAPI document inside) is built by `HttpApiScalar` on its first request, not at start-up; the
 * module itself, Scalar's script inside, is loaded then too (a chunk of its own in the executable).
 */
export const DocsLive = (servers: Servers) =>
  HttpApiBuilder.Router.use((router) =>
    Effect.gen(function*() {
      const page = yield* Effect.cached(docsPage(servers))
      yield* router.get("/docs", Effect.flatten(page))
    })
  )

/** HttpApiScalar's `/docs` route, built on a router of its own; its handler answers the page. */
const docsPage = (servers: Servers) =>
  Effect.scoped(Effect.gen(function*() {
    const HttpApiScalar = yield* Effect.promise(() => import("@effect/platform/HttpApiScalar"))
    const context = yield* Layer.build(
      HttpApiScalar.layer({ path: "/docs", scalar: { withDefaultFonts: false } }).pipe(
        Layer.provide(Layer.succeed(HttpApi.Api, {
          api: documentedApi(servers) as unknown as HttpApi.HttpApi<string, HttpApiGroup.HttpApiGroup.AnyWithProps>,
          context: Context.empty()
        })),
        Layer.provideMerge(HttpApiBuilder.Router.Live)
      )
    )
    const docs = yield* Effect.provide(HttpApiBuilder.Router.router, context)
    const route = Chunk.findFirst(docs.routes, (route) => route.path === "/docs")
    if (Option.isNone(route)) return yield* Effect.dieMessage("HttpApiScalar registered no /docs route")
    return route.value.handler as Effect.Effect<HttpServerResponse.HttpServerResponse>
  }))
