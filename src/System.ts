/**
 * The server's own routes, outside the versioned API: liveness, readiness, the OpenAPI document and its docs page.
 */
import { HttpApi, HttpApiBuilder, type HttpApiGroup, HttpApiScalar, HttpServerResponse } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { documentedApi, openApiDocument, type Servers } from "./Api.js"
import { Lifecycle } from "./Lifecycle.js"
import { errorResponse } from "./Middleware.js"

export const SYSTEM_PATHS = ["/healthz", "/readyz", "/openapi.json", "/docs"] as const

const READY_TIMEOUT = "2 seconds"

export const SystemRoutesLive = (servers: Servers) =>
  HttpApiBuilder.Router.use((router) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const lifecycle = yield* Lifecycle
      const ok = HttpServerResponse.unsafeJson({ status: "ok" })

      /** Ready while serving and while the database answers (a read of the catalogue) within READY_TIMEOUT. */
      const readiness = Effect.if(lifecycle.draining, {
        onTrue: () => Effect.succeed(errorResponse(503, "unavailable", "The server is shutting down.")),
        onFalse: () =>
          sql`SELECT 1 FROM pets LIMIT 1`.pipe(
            // The answer does not wait for an unanswered query to be cancelled: that happens in the background.
            Effect.disconnect,
            Effect.timeout(READY_TIMEOUT),
            Effect.as(ok),
            Effect.catchAll((error) =>
              Effect.as(
                Effect.logWarning("readiness check failed", error),
                errorResponse(503, "unavailable", "The database does not answer.")
              )
            )
          )
      })

      yield* router.get("/healthz", Effect.succeed(ok))
      yield* router.get("/readyz", readiness)
      yield* router.get("/openapi.json", Effect.succeed(HttpServerResponse.unsafeJson(openApiDocument(servers))))
    })
  )

/** The interactive reference, Scalar, served whole by the executable (no font or script from another host). */
export const DocsLive = (servers: Servers) =>
  HttpApiScalar.layer({ path: "/docs", scalar: { withDefaultFonts: false } }).pipe(
    Layer.provide(Layer.succeed(HttpApi.Api, {
      api: documentedApi(servers) as unknown as HttpApi.HttpApi<string, HttpApiGroup.HttpApiGroup.AnyWithProps>,
      context: Context.empty()
    }))
  )
