/**
 * The engine's one entry: the function that answers every request (`Server.ts`), built from the groups'
 * registrations (`Registration.ts`) and the server's own routes (`HttpRouter.Default`). Each declared endpoint is
 * served by its pipeline (`Derive.ts`, `Pipeline.ts`), and by nothing else; the server's own routes (`/healthz`,
 * `/docs`, …) by the platform's router, behind the same gates. An endpoint the engine cannot serve exactly as
 * `HttpApiBuilder` would stops the start with the reason.
 */
import { HttpRouter, HttpServer } from "@effect/platform"
import { Context, type Duration, Effect, FiberSet, Layer, Option, Runtime, RuntimeFlags } from "effect"
import { Observability } from "../Observability/Hooks.js"
import { DEFAULT_REQUEST_TIMEOUT } from "../Operations/Deadlines.js"
import { RequestLog } from "../Operations/Logging.js"
import { makeAppServer } from "./App.js"
import { makeCors } from "./Cors.js"
import { deriveRoutes } from "./Derive.js"
import { makePipeline } from "./Pipeline.js"
import { RegisteredGroups } from "./Registration.js"
import { makeRequestLogger, withRequestLoggers } from "./RequestLog.js"
import { makeRouteTable } from "./RouteTable.js"
import { makeServer, type Server, type Target } from "./Server.js"

export interface WebHandlerOptions {
  /** `CORS_ORIGINS`: CORS is on for these origins. */
  readonly corsOrigins: Option.Option<ReadonlyArray<string>>
  /** How long a request may take (`REQUEST_TIMEOUT`; 15 seconds unless given). */
  readonly requestTimeout?: Duration.Duration | undefined
}

/** The function that answers every request: what Bun serves in production and what the tests call in-process. */
export class WebHandler extends Context.Tag("Serving/WebHandler")<WebHandler, Server>() {}

/**
 * The web handler of the registered groups and of the server's own routes on `HttpRouter.Default` (their layers in
 * `routes`). Closing its scope interrupts the requests still running.
 */
export const webHandlerFrom = <E, R>(routes: Layer.Layer<RegisteredGroups, E, R>, options: WebHandlerOptions) =>
  Layer.scoped(
    WebHandler,
    Effect.gen(function*() {
      const derived = deriveRoutes(yield* RegisteredGroups)
      if (derived.unserved.length > 0) {
        const reasons = derived.unserved.map(({ endpoint, reason }) => `${endpoint}: ${reason}`).join("; ")
        return yield* Effect.dieMessage(`The engine cannot serve every declared endpoint (${reasons}).`)
      }
      const router = yield* HttpRouter.Default.router
      // Without Effect's own fiber metrics (exported nowhere; counting them costs every request), and with loggers that
      // name the request each line is logged for.
      const runtime = withRequestLoggers(Runtime.disableRuntimeFlag(
        yield* Effect.runtime<HttpRouter.HttpRouter.DefaultServices>(),
        RuntimeFlags.RuntimeMetrics
      ))
      const table = makeRouteTable<Target>([
        ...derived.routes.map((route) => ({
          method: route.method,
          path: route.path,
          target: { _tag: "Endpoint", route } as const
        })),
        ...[...router.routes].map(({ method, path }) => ({ method, path, target: { _tag: "App" } as const }))
      ])
      const requestTimeout = options.requestTimeout ?? DEFAULT_REQUEST_TIMEOUT
      // The requests still running when the scope closes are interrupted (and answered as the server shutting down).
      const fibers = yield* FiberSet.make()
      const closing = { now: false }
      yield* Effect.addFinalizer(() => Effect.sync(() => closing.now = true))
      return makeServer({
        table,
        endpoints: derived.routes,
        pipeline: makePipeline(runtime as Runtime.Runtime<never>, derived.routes, requestTimeout, {
          set: fibers,
          closing: () => closing.now
        }),
        app: makeAppServer(runtime, yield* HttpRouter.toHttpApp(router), requestTimeout),
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
    Layer.provide([HttpRouter.Default.Live, HttpServer.layerContext])
  )
