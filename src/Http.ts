/**
 * Where the layers meet the server: the API's declaration and its implementations (handlers, middleware), the
 * server's own routes, and the function that answers every request (`Serving/Server.ts`), with its pipeline derived
 * from the declaration.
 */
import { HttpApi, HttpApiBuilder, HttpApp, type HttpRouter, HttpServer } from "@effect/platform"
import { Context, Effect, FiberRef, HashMap, Layer, Option, Runtime, RuntimeFlags, Schema, Tracer } from "effect"
import { type Servers, ServedApi } from "./Api.js"
import { ApiKeys } from "./Auth/ApiKeys.js"
import { AuthorizationLive, BearerCheck } from "./Auth/Http.js"
import { RequestLog } from "./Logging.js"
import { Observability } from "./Observability/Hooks.js"
import { DeprecationLive, PetsHandlers, PetsHttpLive } from "./Pets/Http.js"
import { PetsRepo } from "./Pets/Repo.js"
import { appErrors } from "./Serving/AppErrors.js"
import { makeCors } from "./Serving/Cors.js"
import { deriveRoutes } from "./Serving/Derive.js"
import { ApiHandlers, apiHandlers } from "./Serving/Handlers.js"
import { makePipeline } from "./Serving/Pipeline.js"
import { makeRequestLogger } from "./Serving/RequestLog.js"
import { makeRouteTable } from "./Serving/RouteTable.js"
import { type AppAnswer, makeServer, type Server, type Target } from "./Serving/Server.js"
import { DocsLive, SystemRoutesLive } from "./System.js"

export const ApiLive = HttpApiBuilder.api(ServedApi).pipe(
  Layer.provide(PetsHttpLive),
  Layer.provide([AuthorizationLive, DeprecationLive])
)

/** The same handlers, by group, for the pipeline. */
export const ApiHandlersLive = Layer.effect(ApiHandlers, Effect.map(PetsHandlers, (pets) => apiHandlers(ServedApi, { pets })))

/** Everything that answers requests, given the repositories, the lifecycle and a SQL client. */
export const RoutesLive = (servers: Servers) =>
  Layer.mergeAll(ApiLive, ApiHandlersLive, SystemRoutesLive(servers), DocsLive(servers)).pipe(
    Layer.provideMerge(Layer.mergeAll(PetsHandlers.Default, BearerCheck.Default))
  )

export interface AppOptions {
  readonly servers: Servers
  readonly corsOrigins: Option.Option<ReadonlyArray<string>>
}

/** The function that answers every request: what Bun serves in production and what the tests call in-process. */
export class WebHandler extends Context.Tag("Http/WebHandler")<WebHandler, Server>() {}

/** The request id and, once the app is done, the log annotations of a request the HttpApi app serves. */
interface AppRequest {
  readonly requestId: string
  annotations: HashMap.HashMap<string, unknown>
}
const AppRequest = Context.GenericTag<AppRequest>("Http/AppRequest")

/** The app's fiber logs with the request's id, and hands back its log annotations (the key id among them). */
const annotated = <E, R>(app: HttpApp.Default<E, R>) =>
  Effect.flatMap(AppRequest, (state) =>
    Effect.zipRight(
      FiberRef.update(FiberRef.currentLogAnnotations, HashMap.set<string, unknown>("requestId", state.requestId)),
      Effect.ensuring(
        app,
        Effect.map(FiberRef.get(FiberRef.currentLogAnnotations), (annotations) => {
          state.annotations = annotations
        })
      )
    ))

/** The web handler of the given routes (repositories, lifecycle and SQL client still to be provided). */
export const webHandlerFrom = <E, R>(
  routes: Layer.Layer<HttpApi.Api | ApiHandlers, E, R>,
  options: Pick<AppOptions, "corsOrigins"> & {
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
      // Effect's own fiber metrics (started, active, lifetimes) are exported nowhere here; counting them costs every request.
      const runtime = Runtime.disableRuntimeFlag(
        yield* Effect.runtime<HttpRouter.HttpRouter.DefaultServices>(),
        RuntimeFlags.RuntimeMetrics
      )

      const endpointTargets = derived.routes.map((route) => ({
        method: route.method,
        path: route.path,
        target: {
          _tag: "Endpoint",
          route,
          headerNames: Option.match(api.groups[route.group]!.endpoints[route.name]!.headersSchema, {
            onNone: () => [],
            onSome: (schema) => headerNamesOf(schema)
          })
        } as Target
      }))
      // The declared endpoints first; the app's router adds the server's own routes (and what the pipeline could not derive).
      const table = makeRouteTable([
        ...endpointTargets,
        ...[...router.routes].map((route) => ({ method: route.method, path: route.path, target: { _tag: "App" } as Target }))
      ])
      const declaredErrors = Schema.is(Schema.Union(...derived.routes.flatMap((route) => route.failures.map((f) => f.schema))))
      // The app's own failures answered the pipeline's way, inside the app (before its encoder of declared errors).
      const middleware = yield* HttpApiBuilder.Middleware
      yield* middleware.add(appErrors({
        isDeclared: declaredErrors,
        declaredHeaders: (method, path) => {
          const target = table.match(path)?.entry.targets.get(method)
          return target?._tag === "Endpoint" ? target.headerNames : []
        }
      }))
      const app = HttpApp.toWebHandlerRuntime(runtime)(
        // `AppRequest` is in the context each request is served with (`serveByApp`).
        annotated(yield* HttpApiBuilder.httpApp) as HttpApp.Default<never, HttpRouter.HttpRouter.DefaultServices>
      )
      const serveByApp = (request: Request, requestId: string, parentSpan?: Tracer.Span): Promise<AppAnswer> => {
        const state: AppRequest = { requestId, annotations: HashMap.empty() }
        const context = Context.make(AppRequest, state)
        return app(request, parentSpan === undefined ? context : Context.add(context, Tracer.ParentSpan, parentSpan))
          .then((response) => ({ response, annotations: state.annotations }))
      }
      const pipeline = makePipeline(runtime as Runtime.Runtime<never>, derived.routes)
      return makeServer({
        table,
        serveEndpoint: options.pipeline === false
          ? (_route, input) =>
            serveByApp(
              // The body already read, and the client's signal kept: a client that goes away still ends the request.
              new Request(input.request.url, {
                method: input.request.method,
                headers: input.request.headers,
                body: input.body?.text ?? null,
                signal: input.request.signal
              }),
              input.requestId,
              input.parentSpan
            )
          : pipeline,
        app: serveByApp,
        cors: Option.getOrUndefined(Option.map(options.corsOrigins, makeCors)),
        log: makeRequestLogger(runtime as Runtime.Runtime<never>, Option.getOrUndefined(yield* Effect.serviceOption(RequestLog))),
        observe: Option.getOrUndefined(yield* Effect.serviceOption(Observability))?.observeRequest
      })
    })
  ).pipe(
    Layer.provide(routes),
    Layer.provide([HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer, HttpServer.layerContext])
  )

/** The names of the headers a headers schema declares (lower case, as HttpApi reads them). */
const headerNamesOf = (schema: Schema.Schema.Any): ReadonlyArray<string> => {
  let ast = schema.ast
  while (ast._tag === "Transformation" || ast._tag === "Refinement") ast = ast.from
  return ast._tag === "TypeLiteral" ? ast.propertySignatures.map((p) => String(p.name).toLowerCase()) : []
}

/** The web handler of the whole application; needs the lifecycle and a SQL client. */
export const WebHandlerLive = (options: AppOptions) =>
  webHandlerFrom(RoutesLive(options.servers).pipe(Layer.provide([PetsRepo.Default, ApiKeys.Default])), options)
