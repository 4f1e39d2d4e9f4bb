/**
 * Where the layers meet the server: the API's handlers and security, the server's own routes, the global middleware,
 * the repositories and the database.
 */
import { HttpApiBuilder, HttpServer } from "@effect/platform"
import { BunHttpServer } from "@effect/platform-bun"
import { Effect, Layer } from "effect"
import { type Servers, ServedApi } from "./Api.js"
import { ApiKeys } from "./Auth/ApiKeys.js"
import { AuthorizationLive } from "./Auth/Http.js"
import { makeMiddleware } from "./Middleware.js"
import { DeprecationLive, PetsHttpLive } from "./Pets/Http.js"
import { PetsRepo } from "./Pets/Repo.js"
import { DocsLive, SYSTEM_PATHS, SystemRoutesLive } from "./System.js"

export const ApiLive = HttpApiBuilder.api(ServedApi).pipe(
  Layer.provide(PetsHttpLive),
  Layer.provide([AuthorizationLive, DeprecationLive])
)

/** Everything that answers requests, given the repositories and a SQL client. */
export const RoutesLive = (servers: Servers) =>
  Layer.mergeAll(
    ApiLive,
    SystemRoutesLive(servers),
    DocsLive(servers),
    HttpApiBuilder.middleware(makeMiddleware(SYSTEM_PATHS))
  )

/** Everything that answers requests; needs only a SQL client. */
export const AppLive = (servers: Servers) =>
  RoutesLive(servers).pipe(Layer.provide([PetsRepo.Default, ApiKeys.Default]))

export interface ServeOptions {
  readonly host: string
  readonly port: number
  readonly servers: Servers
  /** Fields for the start-up log line (database, version). */
  readonly describe?: Record<string, string>
}

const startupLog = (fields: Record<string, string>) =>
  Layer.effectDiscard(
    Effect.flatMap(HttpServer.HttpServer, (server) =>
      Effect.logInfo("petstore is listening").pipe(
        Effect.annotateLogs({ ...fields, address: HttpServer.formatAddress(server.address) })
      ))
  )

/** The HTTP server on Bun, listening until interrupted. Needs a SQL client. */
export const HttpLive = (options: ServeOptions) =>
  Layer.mergeAll(HttpApiBuilder.serve(), startupLog(options.describe ?? {})).pipe(
    Layer.provide(AppLive(options.servers)),
    // Bodies are limited by the middleware (a JSON 413 past 64 KiB, without reading further), not by Bun's bare 413.
    Layer.provide(
      BunHttpServer.layer({ hostname: options.host, port: options.port, maxRequestBodySize: Number.MAX_SAFE_INTEGER })
    )
  )
