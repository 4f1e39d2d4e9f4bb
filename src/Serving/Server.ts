/**
 * The function that answers every request — what Bun serves (`fetch`, and the same function per path as Bun's native
 * `routes`) and what the tests call in-process. Its stages, in order, for every request whichever way Bun routed it:
 *
 *   head and target gate → CORS preflight → route table (404/405) → body gate → the endpoint's pipeline (or, for the
 *   server's own routes, the HttpApi app) → the server's headers (request id, protective headers, CORS) → the log line.
 */
import type { Tracer } from "effect"
import type { ObservabilityHooks, RequestObservation } from "../Observability/Hooks.js"
import { type Answer, refusalAnswer, type ResponseAnswer } from "./Answer.js"
import type { Cors } from "./Cors.js"
import type { EndpointRoute } from "./Derive.js"
import * as Gate from "./Gate.js"
import * as Refusals from "./Refusals.js"
import { newRequestId, requestIdOf } from "./RequestId.js"
import type { PipelineRequest } from "./RequestInput.js"
import type { RequestLogger } from "./RequestLog.js"
import type { RouteTable } from "./RouteTable.js"
import { pathOf, queryOf } from "./Url.js"

/** What serves a method of a path: a declared endpoint, or the HttpApi app (the server's own routes). */
export type Target =
  | { readonly _tag: "Endpoint"; readonly route: EndpointRoute }
  | { readonly _tag: "App" }

/** An answer of the HttpApi app: its response, and the annotations set while serving it. */
export type AppAnswer = ResponseAnswer

type Served = Answer | AppAnswer

export interface ServerOptions {
  readonly table: RouteTable<Target>
  /** Serves a request to an endpoint once it passed the gates: the pipeline (or the HttpApi app, to compare them). */
  readonly serveEndpoint: (route: EndpointRoute, input: PipelineRequest) => Served | Promise<Served>
  /** The HttpApi app, for the server's own routes (run under the request's span, if any). */
  readonly app: (request: Request, requestId: string, parentSpan?: Tracer.Span) => Promise<AppAnswer>
  readonly cors: Cors | undefined
  readonly log: RequestLogger
  /** The server span and the request metrics (`Observability/Hooks.ts`), when observability is configured. */
  readonly observe?: ObservabilityHooks["observeRequest"] | undefined
}

/** What every response carries besides its request id (a route may set its own `Cache-Control`). */
export const PROTECTIVE_HEADERS = { "x-content-type-options": "nosniff", "cache-control": "no-store" } as const

type BunRouteHandler = (request: Request) => Response | Promise<Response>

export interface Server {
  (request: Request): Response | Promise<Response>
  /** The same function for each served path, in the shape of `Bun.serve`'s `routes` (Bun matches paths natively). */
  readonly routes: Record<string, BunRouteHandler>
}

/** A HEAD to the server's own routes, as the GET the app serves (the app alone would drop the body's headers). */
const asGet = (request: Request): Request =>
  new Request(request.url, { method: "GET", headers: request.headers, signal: request.signal })

/** The app's answer to that GET as the HEAD's: its headers and the length of its body, without the body. */
const withoutBody = async ({ annotations, response }: AppAnswer): Promise<AppAnswer> => {
  const length = (await response.arrayBuffer()).byteLength
  const headers = new Headers(response.headers)
  headers.set("content-length", String(length))
  return { response: new Response(null, { status: response.status, headers }), annotations }
}

/** The CORS headers over an answer's own: `Vary` added to the answer's (`/docs` varies by encoding), the others set. */
const addCors = (
  cors: Readonly<Record<string, string>>,
  get: (name: string) => string | null | undefined,
  set: (name: string, value: string) => void
) => {
  for (const name in cors) {
    const own = name === "vary" ? get(name) : undefined
    set(name, own === undefined || own === null ? cors[name] : `${own}, ${cors[name]}`)
  }
}

const isAppAnswer = (served: Served): served is AppAnswer => "response" in served

export const makeServer = (options: ServerOptions): Server => {
  const { app, cors, log, observe, serveEndpoint, table } = options

  const respond = (
    request: Request,
    requestId: string,
    started: number,
    served: Served,
    observed?: RequestObservation
  ): Response => {
    const origin = cors?.headersFor(request.headers.get("origin"))
    let response: Response
    if (isAppAnswer(served)) {
      response = served.response
      const headers = response.headers
      headers.set("x-request-id", requestId)
      headers.set("x-content-type-options", PROTECTIVE_HEADERS["x-content-type-options"])
      if (!headers.has("cache-control")) headers.set("cache-control", PROTECTIVE_HEADERS["cache-control"])
      if (origin !== undefined) addCors(origin, (name) => headers.get(name), (name, value) => headers.set(name, value))
    } else {
      // The answer's own headers object (made for this request): the protective headers where it has none of its own.
      const headers = served.headers
      if (!("x-content-type-options" in headers)) {
        headers["x-content-type-options"] = PROTECTIVE_HEADERS["x-content-type-options"]
      }
      if (!("cache-control" in headers)) headers["cache-control"] = PROTECTIVE_HEADERS["cache-control"]
      if (origin !== undefined) addCors(origin, (name) => headers[name], (name, value) => headers[name] = value)
      headers["x-request-id"] = requestId
      if (served.body === null) delete headers["content-type"]
      if (request.method !== "HEAD") response = new Response(served.body, { status: served.status, headers })
      else {
        // A HEAD answers the GET's headers, its length among them, without its body (RFC 9110 §9.3.2).
        headers["content-length"] = String(served.body === null ? 0 : Buffer.byteLength(served.body))
        response = new Response(null, { status: served.status, headers })
      }
    }
    log(request, response.status, started, served.annotations, requestId, observed?.parentSpan)
    observed?.end(response.status, served.annotations.keyId as string | undefined)
    return response
  }

  const refuse = (
    request: Request,
    requestId: string,
    started: number,
    refusal: Refusals.Refusal,
    observed?: RequestObservation
  ) => respond(request, requestId, started, refusalAnswer(refusal), observed)

  const answerEndpoint = (
    request: Request,
    requestId: string,
    started: number,
    route: EndpointRoute,
    params: Record<string, string>,
    observed: RequestObservation | undefined
  ): Response | Promise<Response> => {
    const finish = (served: Served | Promise<Served>) =>
      served instanceof Promise
        ? served.then((done) => respond(request, requestId, started, done, observed))
        : respond(request, requestId, started, served, observed)
    const parentSpan = observed?.parentSpan
    const run = (body: Gate.ReadBody | undefined) =>
      finish(
        serveEndpoint(route, { request, started, params, query: queryOf(request.url), body, requestId, parentSpan })
      )

    const plan = Gate.bodyPlan(route.decodePayload !== undefined, request.method, request.headers)
    if (plan === "none") return run(undefined)
    if (plan !== "read") return refuse(request, requestId, started, plan, observed)
    return Gate.readBody(request).then((bytes) => {
      if (!(bytes instanceof Uint8Array)) return refuse(request, requestId, started, bytes, observed)
      const body = Gate.checkBody(bytes, request.headers)
      return body !== undefined && "code" in body ? refuse(request, requestId, started, body, observed) : run(body)
    })
  }

  const answer = (request: Request): Response | Promise<Response> => {
    const started = performance.now()
    const sent = request.headers.get("x-request-id")
    const requestId = sent === null ? newRequestId() : requestIdOf(sent)
    const method = request.method
    const refusal = Gate.headRefusal(request.url, request.headers) ?? Gate.targetRefusal(request.url)
    if (refusal !== undefined) {
      const observed = observe?.({ method, route: undefined, path: pathOf(request.url), headers: request.headers })
      return refuse(request, requestId, started, refusal, observed)
    }
    const path = pathOf(request.url)
    const match = table.match(path)
    // The server span and the request's metrics: every request, once its route is known (none: a 404).
    const observed = observe?.({ method, route: match?.entry.path, path, headers: request.headers })
    if (match === undefined) return refuse(request, requestId, started, Refusals.notFound(path), observed)
    const { entry, params } = match
    if (cors !== undefined && cors.isPreflight(method, request.headers)) {
      const declared = [...entry.targets.values()].flatMap((target) =>
        target._tag === "Endpoint" ? target.route.headerNames : []
      )
      const headers = cors.preflightHeaders(request.headers.get("origin"), entry.methods, declared)
      if (headers !== undefined) {
        const preflight = new Response(null, {
          status: 204,
          headers: {
            ...headers,
            "x-content-type-options": PROTECTIVE_HEADERS["x-content-type-options"],
            "x-request-id": requestId
          }
        })
        log(request, 204, started, undefined, requestId, observed?.parentSpan)
        observed?.end(204, undefined)
        return preflight
      }
    }
    const target = entry.targets.get(method)
    if (target === undefined) {
      return refuse(request, requestId, started, Refusals.methodNotAllowed(method, entry.methods), observed)
    }
    if (target._tag === "Endpoint") return answerEndpoint(request, requestId, started, target.route, params, observed)
    // The server's own routes take no body; the gate refuses one as it does for the API.
    const plan = Gate.bodyPlan(false, method, request.headers)
    if (plan !== "none" && plan !== "read") return refuse(request, requestId, started, plan, observed)
    if (method === "HEAD") {
      return app(asGet(request), requestId, observed?.parentSpan).then(withoutBody).then((served) =>
        respond(request, requestId, started, served, observed)
      )
    }
    return app(request, requestId, observed?.parentSpan).then((served) =>
      respond(request, requestId, started, served, observed)
    )
  }

  // Bun's native routes only bring a request here sooner: the route table still matches it, by its one rule.
  const routes: Record<string, BunRouteHandler> = Object.fromEntries(table.bunPaths.map(([path]) => [path, answer]))
  return Object.assign(answer, { routes })
}
