/**
 * The engine's one entry: the function that answers every request (`Server.ts`), built from the `HttpApi` app's layers.
 * Its pipeline is derived from the declaration and the handlers (`Derive.ts`). The app's router serves the server's own
 * routes, and whatever the pipeline cannot derive. The app's own failures are answered the pipeline's way
 * (`AppErrors.ts`).
 */
import { HttpApi, HttpApiBuilder, type HttpRouter, HttpServer } from "@effect/platform"
import { Context, type Duration, Effect, Layer, Option, Runtime, RuntimeFlags, Schema } from "effect"
import { Observability } from "../Observability/Hooks.js"
import { DEFAULT_REQUEST_TIMEOUT } from "../Operations/Deadlines.js"
import { RequestLog } from "../Operations/Logging.js"
import { handToApp, makeAppServer } from "./App.js"
import { appErrors } from "./AppErrors.js"
import { makeCors } from "./Cors.js"
import { deriveRoutes } from "./Derive.js"
import { ApiHandlers } from "./Handlers.js"
import { makePipeline } from "./Pipeline.js"
import { makeRequestLogger, withRequestLoggers } from "./RequestLog.js"
import { makeRouteTable } from "./RouteTable.js"
import { makeServer, type Server, type Target } from "./Server.js"

export interface WebHandlerOptions {
  /** `CORS_ORIGINS`: CORS is on for these origins. */
  readonly corsOrigins: Option.Option<ReadonlyArray<string>>
  /** How long a request may take (`REQUEST_TIMEOUT`; 15 seconds unless given). */
  readonly requestTimeout?: Duration.Duration | undefined
  /** `false`: every endpoint served by the HttpApi app instead of the pipeline (for tests comparing the two). */
  readonly pipeline?: boolean
}

/** The function that answers every request: what Bun serves in production and what the tests call in-process. */
export class WebHandler extends Context.Tag("Serving/WebHandler")<WebHandler, Server>() {}

/** The web handler of the given routes (repositories, lifecycle and SQL client still to be provided). */
export const webHandlerFrom = <E, R>(
  routes: Layer.Layer<HttpApi.Api | ApiHandlers, E, R>,
  options: WebHandlerOptions
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

      // The declared endpoints first; the app's router adds the server's own routes (and what the pipeline could not
      // derive).
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
