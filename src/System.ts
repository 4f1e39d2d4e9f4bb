/**
 * The server's own routes, outside the versioned API: liveness, readiness, the OpenAPI document and its docs page.
 */
import { HttpApi, HttpApiBuilder, HttpApiScalar, HttpServerResponse } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { documentedApi, openApiDocument, type Servers } from "./Api.js"
import { errorResponse } from "./Middleware.js"

export const SYSTEM_PATHS = ["/healthz", "/readyz", "/openapi.json", "/docs"] as const

const READY_TIMEOUT = "2 seconds"

export const SystemRoutesLive = (servers: Servers) =>
  HttpApiBuilder.Router.use((router) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const ok = HttpServerResponse.unsafeJson({ status: "ok" })
      const document = HttpServerResponse.unsafeJson(openApiDocument(servers))
      yield* router.get("/healthz", Effect.succeed(ok))
      yield* router.get(
        "/readyz",
        sql`SELECT 1`.pipe(
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
      )
      yield* router.get("/openapi.json", Effect.succeed(document))
    })
  )

/** The interactive reference, Scalar, served whole by the executable (no font or script from another host). */
export const DocsLive = (servers: Servers) =>
  HttpApiScalar.layer({ path: "/docs", scalar: { withDefaultFonts: false, hideDownloadButton: false } as any }).pipe(
    Layer.provide(Layer.succeed(HttpApi.Api, { api: documentedApi(servers) as any, context: Context.empty() }))
  )
