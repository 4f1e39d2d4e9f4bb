/**
 * The function that answers every request — what Bun serves (`fetch`, and the same function per path as Bun's native
 * `routes`) and what the tests call in-process. Its stages, in order, for every request whichever way Bun routed it:
 *
 *   head and target gate → route table (404) → CORS preflight → 405 → body gate → the endpoint's pipeline (or, for the
 *   server's own routes, the platform's router) → the server's headers (request id, protective headers, CORS) → the log
 *   line.
 */
import { Duration } from "effect"
import { randomUUID } from "node:crypto"
import type { ObservabilityHooks, RequestObservation } from "../Observability/Hooks.js"
import { refusalAnswer, type Served } from "./Answer.js"
import type { AppServer } from "./App.js"
import type { Cors } from "./Cors.js"
import type { EndpointRoute } from "./Derive.js"
import * as Gate from "./Gate.js"
import type { PipelineRequest } from "./Pipeline.js"
import * as Refusals from "./Refusals.js"
import type { RequestLogger } from "./RequestLog.js"
import type { RouteTable } from "./RouteTable.js"
import { pathOf, queryOf } from "./Url.js"

/** What serves a method of a path: a declared endpoint, or the platform's router (the server's own routes). */
export type Target = { readonly _tag: "Endpoint"; readonly route: EndpointRoute } | { readonly _tag: "App" }

/** What every response carries besides its request id (a route may set its own `Cache-Control`). */
const PROTECTIVE_HEADERS = { "x-content-type-options": "nosniff", "cache-control": "no-store" } as const

/** The client's `X-Request-Id` when it is 1 to 128 visible ASCII characters, otherwise a new UUID. */
const REQUEST_ID = /^[\x21-\x7e]{1,128}$/

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

export const makeServer = (options: {
  readonly table: RouteTable<Target>
  /** The declared endpoints the table routes to. */
  readonly endpoints: ReadonlyArray<EndpointRoute>
  /** Serves a request to an endpoint once it passed the gates. */
  readonly pipeline: (route: EndpointRoute, input: PipelineRequest) => Served | Promise<Served>
  /** The platform's router, for the server's own routes. */
  readonly app: AppServer
  readonly cors: Cors | undefined
  readonly log: RequestLogger
  /** The server span and the request metrics (`Observability/Hooks.ts`), when observability is configured. */
  readonly observe?: ObservabilityHooks["observeRequest"] | undefined
}) => {
  const { app, cors, log, observe, pipeline, table } = options

  const respond = (
    request: Request,
    requestId: string,
    started: number,
    served: Served,
    observed: RequestObservation | undefined
  ): Response => {
    const origin = cors?.headersFor(request.headers.get("origin"))
    let response: Response
    if ("response" in served) {
      response = served.response
      const headers = response.headers
      headers.set("x-request-id", requestId)
      headers.set("x-content-type-options", PROTECTIVE_HEADERS["x-content-type-options"])
      if (!headers.has("cache-control")) headers.set("cache-control", PROTECTIVE_HEADERS["cache-control"])
      if (origin !== undefined) addCors(origin, (name) => headers.get(name), (name, value) => headers.set(name, value))
    } else {
      // The answer's own headers object (made for this request): the protective headers where it has none of its own.
      const headers = served.headers
      headers["x-content-type-options"] ??= PROTECTIVE_HEADERS["x-content-type-options"]
      headers["cache-control"] ??= PROTECTIVE_HEADERS["cache-control"]
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

  const answer = (request: Request): Response | Promise<Response> => {
    const started = performance.now()
    const { headers, method, url } = request
    const sent = headers.get("x-request-id")
    const requestId = sent !== null && REQUEST_ID.test(sent) ? sent : randomUUID()
    const path = pathOf(url)
    const refusal = Gate.headRefusal(url, headers) ?? Gate.targetRefusal(url)
    const match = refusal === undefined ? table.match(path, method) : undefined
    // The server span and the request's metrics: every request, with its route once it is known.
    const observed = observe?.({ method, route: match?.entry.path, path, headers })
    const finish = (served: Served) => respond(request, requestId, started, served, observed)
    const refuse = (refusal: Refusals.Refusal) => finish(refusalAnswer(refusal))
    if (refusal !== undefined) return refuse(refusal)
    if (match === undefined) return refuse(Refusals.notFound(path))
    const { entry, methods, params, targets } = match
    const preflight = cors?.preflight(
      request,
      methods,
      () => [...targets.values()].flatMap((target) => target._tag === "Endpoint" ? target.route.headerNames : [])
    )
    if (preflight !== undefined && "code" in preflight) return refuse(preflight)
    if (preflight !== undefined) {
      log(request, 204, started, undefined, requestId, observed?.parentSpan)
      observed?.end(204, undefined)
      const nosniff = { "x-content-type-options": PROTECTIVE_HEADERS["x-content-type-options"] }
      return new Response(null, { status: 204, headers: { ...preflight, ...nosniff, "x-request-id": requestId } })
    }
    const target = entry.targets.get(method)
    if (target === undefined) return refuse(Refusals.methodNotAllowed(method, methods))
    // Only an endpoint that declares a payload takes a body (the server's own routes take none).
    const route = target._tag === "Endpoint" ? target.route : undefined
    const plan = Gate.bodyPlan(route?.decodePayload !== undefined, request)
    if (plan !== "none" && plan !== "read") return refuse(plan)
    const parentSpan = observed?.parentSpan
    if (route !== undefined) {
      const run = (body: Gate.ReadBody | undefined) => {
        const served = pipeline(route, {
          request,
          started,
          params,
          query: queryOf(url),
          body,
          requestId,
          parentSpan
        })
        return served instanceof Promise ? served.then(finish) : finish(served)
      }
      if (plan === "none") return run(undefined)
      return Gate.readBody(request).then((bytes) => {
        const body = bytes instanceof Uint8Array ? Gate.checkBody(bytes, headers) : bytes
        return "code" in body ? refuse(body) : run(body)
      })
    }
    if (method !== "HEAD") return app(request, started, requestId, parentSpan).then(finish)
    // A HEAD to the server's own routes is the GET the app serves, its headers and length without its body.
    const get = new Request(url, { method: "GET", headers, signal: request.signal })
    return app(get, started, requestId, parentSpan).then(async ({ annotations, response }) => {
      const length = (await response.arrayBuffer()).byteLength
      const answered = new Response(null, { status: response.status, headers: response.headers })
      answered.headers.set("content-length", String(length))
      return finish({ response: answered, annotations })
    })
  }

  // Bun's native routes only bring a request here sooner: the route table still matches it, by its one rule.
  const routes = Object.fromEntries(table.bunPaths.map((path) => [path, answer]))
  /** The longest an endpoint holds a request by design (a long poll): a connection's idle timeout is past it. */
  const longestHold = Duration.millis(Math.max(0, ...options.endpoints.map((route) => route.holdMillis)))
  return Object.assign(answer, { routes, longestHold })
}

/** The function that answers every request, and the same function for each served path as Bun's `routes`. */
export type Server = ReturnType<typeof makeServer>
