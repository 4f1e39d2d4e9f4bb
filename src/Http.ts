/**
 * Where the layers meet the server: the API's declaration with its implementations (handlers, middleware) as the
 * `HttpApi` app, the same handlers for the engine, the server's own routes, and the engine's web handler over them
 * (`Serving/WebHandler.ts`).
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { ServedApi, type Servers } from "./Api.js"
import { ApiKeys } from "./Auth/ApiKeys.js"
import { AuthorizationLive } from "./Auth/Http.js"
import { DeprecationLive, PetsHandlers, PetsHttpLive } from "./Pets/Http.js"
import { PetsRepo } from "./Pets/Repo.js"
import { type AnyHandler, ApiHandlers } from "./Serving/Handlers.js"
import { webHandlerFrom, type WebHandlerOptions } from "./Serving/WebHandler.js"
import { DocsLive, SystemRoutesLive } from "./System.js"

export const ApiLive = HttpApiBuilder.api(ServedApi).pipe(
  Layer.provide(PetsHttpLive),
  Layer.provide([AuthorizationLive, DeprecationLive])
)

/** The same handlers, by group, for the engine. */
export const ApiHandlersLive = Layer.effect(
  ApiHandlers,
  Effect.map(PetsHandlers, (pets) => ({ pets: pets as unknown as Record<string, AnyHandler> }))
)

/** Everything that answers requests, given the repositories, the lifecycle and a SQL client. */
export const RoutesLive = (servers: Servers) =>
  Layer.mergeAll(ApiLive, ApiHandlersLive, SystemRoutesLive(servers), DocsLive(servers)).pipe(
    Layer.provideMerge(PetsHandlers.Default)
  )

export interface AppOptions extends WebHandlerOptions {
  readonly servers: Servers
}

/** The web handler of the whole application; needs the lifecycle and a SQL client. */
export const WebHandlerLive = (options: AppOptions) =>
  webHandlerFrom(RoutesLive(options.servers).pipe(Layer.provide([PetsRepo.Default, ApiKeys.Default])), options)
