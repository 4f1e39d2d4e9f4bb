/**
 * Where the layers meet the server: the API's handlers and security, the server's own routes, the two rings of
 * middleware, the repositories, and Bun's listener with its graceful drain.
 */
import { type HttpApi, HttpApiBuilder, HttpApp, type HttpRouter, HttpServer } from "@effect/platform"
import { Context, Effect, Layer, Option, Runtime, RuntimeFlags } from "effect"
import { type Servers, ServedApi } from "./Api.js"
import { Authorization } from "./Auth/Api.js"
import { ApiKeys } from "./Auth/ApiKeys.js"
import { AuthorizationLive, BearerCheck, CHALLENGE_HEADERS } from "./Auth/Http.js"
import { type Dispatcher, type Implementations, makeDispatcher, withoutRoutes } from "./Dispatch.js"
import { Unauthorized } from "./Domain/Errors.js"
import { RequestLog } from "./Logging.js"
import { makeApiMiddleware, makeServerMiddleware } from "./Middleware.js"
import { Deprecation } from "./Pets/Api.js"
import { DEPRECATION_HEADERS, DeprecationLive, PetsHandlers, PetsHttpLive } from "./Pets/Http.js"
import { PetsRepo } from "./Pets/Repo.js"
import { DocsLive, SYSTEM_PATHS, SystemRoutesLive } from "./System.js"

export const ApiLive = HttpApiBuilder.api(ServedApi).pipe(
  Layer.provide(PetsHttpLive),
  Layer.provide([AuthorizationLive, DeprecationLive])
)

/**
 * What the dispatcher's direct routes need beside the declaration: the same handlers and the same bearer check the
 * HttpApi app runs, and what the `Deprecation` middleware and a 401 add to an answer.
 */
export class DirectRoutes extends Context.Tag("Http/DirectRoutes")<DirectRoutes, Implementations>() {}

export const DirectRoutesLive = Layer.effect(
  DirectRoutes,
  Effect.gen(function*() {
    const pets = yield* PetsHandlers
    const bearer = yield* BearerCheck
    return {
      handlers: { pets },
      security: new Map([[Authorization, bearer.check]]),
      headers: new Map([[Deprecation, DEPRECATION_HEADERS]]),
      errorHeaders: (error) => (error instanceof Unauthorized ? CHALLENGE_HEADERS : undefined)
    } satisfies Implementations
  })
)

/** Everything that answers requests, given the repositories, the lifecycle and a SQL client. */
export const RoutesLive = (servers: Servers) =>
  Layer.mergeAll(
    ApiLive,
    DirectRoutesLive,
    SystemRoutesLive(servers),
    DocsLive(servers),
    HttpApiBuilder.middleware(makeApiMiddleware(SYSTEM_PATHS))
  ).pipe(Layer.provideMerge(Layer.mergeAll(PetsHandlers.Default, BearerCheck.Default)))

export interface AppOptions {
  readonly servers: Servers
  readonly corsOrigins: Option.Option<ReadonlyArray<string>>
}

/**
 * The function that answers every request: what Bun serves in production and what the tests call in-process. It is
 * the dispatcher of `Dispatch.ts`: the direct routes derived from the API declaration, in front of the HttpApi app.
 */
export class WebHandler extends Context.Tag("Http/WebHandler")<WebHandler, Dispatcher>() {}

/** The web handler of the given routes (repositories, lifecycle and SQL client still to be provided). */
export const webHandlerFrom = <E, R>(
  routes: Layer.Layer<HttpApi.Api | DirectRoutes, E, R>,
  options: Pick<AppOptions, "corsOrigins"> & {
    /** `false`: the HttpApi app alone, without the direct routes (for tests comparing the two). */
    readonly directRoutes?: boolean
  }
) =>
  Layer.effect(
    WebHandler,
    Effect.gen(function*() {
      const app = yield* HttpApiBuilder.httpApp
      // Effect's own fiber metrics (started, active, lifetimes) are exported nowhere here; counting them costs every request.
      const runtime = Runtime.disableRuntimeFlag(
        yield* Effect.runtime<HttpRouter.HttpRouter.DefaultServices>(),
        RuntimeFlags.RuntimeMetrics
      )
      const fallback = HttpApp.toWebHandlerRuntime(runtime)(makeServerMiddleware(options)(app))
      // With CORS on, every answer goes through the HttpApp's CORS middleware.
      if (Option.isSome(options.corsOrigins) || options.directRoutes === false) return withoutRoutes(fallback)
      return makeDispatcher({
        api: ServedApi,
        implementations: yield* DirectRoutes,
        fallback,
        runtime: runtime as Runtime.Runtime<never>,
        requestLog: Option.getOrUndefined(yield* Effect.serviceOption(RequestLog))
      })
    })
  ).pipe(
    Layer.provide(routes),
    Layer.provide([HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer, HttpServer.layerContext])
  )

/** The web handler of the whole application; needs the lifecycle and a SQL client. */
export const WebHandlerLive = (options: AppOptions) =>
  webHandlerFrom(RoutesLive(options.servers).pipe(Layer.provide([PetsRepo.Default, ApiKeys.Default])), options)

