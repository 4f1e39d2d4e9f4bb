/**
 * Where the layers meet the server: the API's declaration and its implementations (handlers, middleware), the
 * server's own routes, and the function that answers every request (`Serving/Server.ts`), with its pipeline derived
 * from the declaration.
 */
import { HttpApi, HttpApiBuilder, type HttpRouter, HttpServer } from "@effect/platform"
import { Context, type Duration, Effect, Layer, Option, Runtime, RuntimeFlags, Schema } from "effect"
import { ServedApi, type Servers } from "./Api.js"
import { ApiKeys } from "./Auth/ApiKeys.js"
import { AuthorizationLive } from "./Auth/Http.js"
import { Observability } from "./Observability/Hooks.js"
import { DEFAULT_REQUEST_TIMEOUT } from "./Operations/Deadlines.js"
import { RequestLog } from "./Operations/Logging.js"
import { DeprecationLive, PetsHandlers, PetsHttpLive } from "./Pets/Http.js"
import { PetsRepo } from "./Pets/Repo.js"
import { handToApp, makeAppServer } from "./Serving/App.js"
import { appErrors } from "./Serving/AppErrors.js"
import { makeCors } from "./Serving/Cors.js"
import { deriveRoutes } from "./Serving/Derive.js"
import { type AnyHandler, ApiHandlers } from "./Serving/Handlers.js"
import { makePipeline } from "./Serving/Pipeline.js"
import { makeRequestLogger, withRequestLoggers } from "./Serving/RequestLog.js"
import { makeRouteTable } from "./Serving/RouteTable.js"
import { makeServer, type Server, type Target } from "./Serving/Server.js"
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

export interface AppOptions {
  readonly servers: Servers
  readonly corsOrigins: Option.Option<ReadonlyArray<string>>
  /** How long a request may take (`REQUEST_TIMEOUT`; 15 seconds unless given). */
  readonly requestTimeout?: Duration.Duration | undefined
}

/** The function that answers every request: what Bun serves in production and what the tests call in-process. */
export class WebHandler extends Context.Tag("Http/WebHandler")<WebHandler, Server>() {}

/** The web handler of the given routes (repositories, lifecycle and SQL client still to be provided). */
export const webHandlerFrom = <E, R>(
  routes: Layer.Layer<HttpApi.Api | ApiHandlers, E, R>,
  options: Pick<AppOptions, "corsOrigins" | "requestTimeout"> & {
    /** `false`: every endpoint served by the HttpApi app instead of the pipeline (for tests comparing the two). */
    readonly pipeline?: boolean
  }
) =>
  Layer.effect(
    WebHandler,
    Effect.gen(function*() {
      const { api, context } = yield* HttpApi.Api
      const derived = deriveRoutes(api as unknown as HttpApi.HttpApi.AnyWithProps, yield* ApiHandlers, context)
      for (const { endpoint, reason } of derived.unserved) {
        yield* Effect.logWarning("endpoint served by the HttpApi app: the pipeline cannot serve it").pipe(
          Effect.annotateLogs({ endpoint, reason })
        )
      }
      const router = yield* HttpApiBuilder.Router.router
      // Without Effect's own fiber metrics (exported nowhere; counting them costs every request), and with loggers that
      // name the request each line is logged for.
      const runtime = withRequestLoggers(Runtime.disableRuntimeFlag(
        yield* Effect.runtime<HttpRouter.HttpRouter.DefaultServices>(),
        RuntimeFlags.RuntimeMetrics
      ))

      // The declared endpoints first; the app's router adds the server's own routes (and what the pipeline could not derive).
      const table = makeRouteTable<Target>([
        ...derived.routes.map((route) => ({
          method: route.method,
          path: route.path,
          target: { _tag: "Endpoint", route } as const
        })),
        ...[...router.routes].map(({ method, path }) => ({ method, path, target: { _tag: "App" } as const }))
      ])
      // The app's own failures answered the pipeline's way, inside the app (before its encoder of declared errors).
      yield* (yield* HttpApiBuilder.Middleware).add(appErrors({
        isDeclared: Schema.is(Schema.Union(...derived.routes.flatMap((route) => route.failures.map((f) => f.schema)))),
        declaredHeaders: (method, path) => {
          const target = table.match(path)?.entry.targets.get(method)
          return target?._tag === "Endpoint" ? target.route.headerNames : []
        }
      }))
      const app = makeAppServer(runtime, yield* HttpApiBuilder.httpApp)
      return makeServer({
        table,
        serveEndpoint: options.pipeline === false ? handToApp(app) : makePipeline(
          runtime as Runtime.Runtime<never>,
          derived.routes,
          options.requestTimeout ?? DEFAULT_REQUEST_TIMEOUT
        ),
        app,
        cors: Option.getOrUndefined(Option.map(options.corsOrigins, makeCors)),
        log: makeRequestLogger(
          runtime as Runtime.Runtime<never>,
          Option.getOrUndefined(yield* Effect.serviceOption(RequestLog))
        ),
        observe: Option.getOrUndefined(yield* Effect.serviceOption(Observability))?.observeRequest
      })
    })
  ).pipe(
    Layer.provide(routes),
    Layer.provide([HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer, HttpServer.layerContext])
  )

/** The web handler of the whole application; needs the lifecycle and a SQL client. */
export const WebHandlerLive = (options: AppOptions) =>
  webHandlerFrom(RoutesLive(options.servers).pipe(Layer.provide([PetsRepo.Default, ApiKeys.Default])), options)
