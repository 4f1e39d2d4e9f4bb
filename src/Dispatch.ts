/**
 * The dispatcher: the function that answers every request, in production (Bun's `fetch`) and in the tests.
 *
 * The HttpApi app is general and slow per request (a router, context plumbing, middleware rings, encoders built for any
 * schema). So each endpoint of the `HttpApi` declaration also gets a direct route, derived from the declaration by
 * `HttpApi.reflect`: its method and path; decoders made from the endpoint's own path, query and payload schemas; the
 * same handler and the same security check the HttpApi app calls; the success encoded as the endpoint's success schema
 * and status say, each typed failure as the error schema of its status says. Nothing about an endpoint is written here.
 *
 * Everything the direct route is not sure to answer exactly as the HttpApi app would goes to the HttpApi app itself, the
 * fallback: unknown paths and methods, a body that is not a declared-length JSON object within the limit, a request or
 * head that is too large, any failed decode (so every error message stays the app's), CORS. An endpoint whose
 * declaration uses something this module does not implement (an unknown middleware, headers or multipart schemas,
 * several success statuses, a non-JSON encoding) is left to the fallback entirely.
 */
import { HttpApi, type HttpApiEndpoint, HttpApiSchema } from "@effect/platform"
import {
  Cause,
  Effect,
  Either,
  Exit,
  FiberId,
  FiberRef,
  FiberRefs,
  HashMap,
  HashSet,
  Logger,
  LogLevel,
  Option,
  Runtime,
  Schema
} from "effect"
import type * as AST from "effect/SchemaAST"
import type { RequestLogWriter } from "./Logging.js"
import { isJsonMediaType, readJsonBody } from "./JsonBody.js"
import { headOverLimit, MAX_BODY_BYTES, pathOf, PROTECTIVE_HEADERS, requestIdOf } from "./Middleware.js"

/** What a shared handler answers: the success value, and the headers the contract gives that answer. */
export interface Answer<A> {
  readonly value: A
  readonly headers?: Readonly<Record<string, string>> | undefined
}

/** A decoded request, as HttpApi hands it to a handler. */
export interface Decoded {
  path?: unknown
  urlParams?: unknown
  payload?: unknown
}

export type SharedHandler = (request: any) => Effect.Effect<Answer<unknown>, unknown>

export interface Implementations {
  /** The handlers, by group and endpoint name. */
  readonly handlers: Readonly<Record<string, object>>
  /** The check behind each security middleware (by its tag), given the request's `Authorization` header; `id` goes to the log. */
  readonly security: ReadonlyMap<
    unknown,
    (authorization: string | null) => Effect.Effect<{ readonly id: string }, unknown>
  >
  /** Middleware (by tag) whose whole effect is to add these headers to every answer of the endpoint. */
  readonly headers: ReadonlyMap<unknown, Readonly<Record<string, string>>>
  /** Headers some failures carry (a 401's challenge). */
  readonly errorHeaders: (error: unknown) => Readonly<Record<string, string>> | undefined
}

export interface DispatchOptions {
  readonly api: HttpApi.HttpApi.Any
  readonly implementations: Implementations
  /** The HttpApi app, with the server middleware: it answers whatever the direct routes leave. */
  readonly fallback: (request: Request) => Promise<Response>
  /** The runtime of the app (its logger, log level, tracer settings). */
  readonly runtime: Runtime.Runtime<never>
  /** Writes the request's log line directly, when the configured logger has such a writer (see `Logging.ts`). */
  readonly requestLog?: RequestLogWriter | undefined
}

const SERVER_ERROR = JSON.stringify({
  code: "internal_error",
  message: "The server failed to answer this request; it has been logged.",
  status: 500
})
const INTERRUPTED = JSON.stringify({ code: "unavailable", message: "The server is shutting down.", status: 503 })

/** Whether encoding a value of this schema changes it (else the value is its own JSON form). */
const transforms = (ast: AST.AST): boolean => {
  switch (ast._tag) {
    case "Transformation":
    case "Declaration":
    case "Suspend":
      return true
    case "Refinement":
      return transforms(ast.from)
    case "TypeLiteral":
      return ast.propertySignatures.some((p) => transforms(p.type)) || ast.indexSignatures.some((i) => transforms(i.type))
    case "TupleType":
      return ast.elements.some((e) => transforms(e.type)) || ast.rest.some((r) => transforms(r.type))
    case "Union":
      return ast.types.some(transforms)
    default:
      return false
  }
}

interface Route {
  readonly method: string
  readonly path: string
  readonly match: (path: string) => Record<string, string> | undefined
  readonly serve: (request: Request, params: Record<string, string>, started: number) => Response | Promise<Response>
}

/** `/v1/pets/:petId` → a matcher returning the raw (undecoded) parameters. */
const matcher = (path: string): Route["match"] => {
  const names: Array<string> = []
  const source = path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/:(\w+)/g, (_, name: string) => {
    names.push(name)
    return "([^/]+)"
  })
  if (names.length === 0) return (candidate) => (candidate === path ? {} : undefined)
  const pattern = new RegExp(`^${source}$`)
  return (candidate) => {
    const found = pattern.exec(candidate)
    if (found === null) return undefined
    const params: Record<string, string> = {}
    for (let i = 0; i < names.length; i++) params[names[i]] = found[i + 1]
    return params
  }
}

const queryOf = (url: string): Record<string, string | Array<string>> => {
  const at = url.indexOf("?")
  const out: Record<string, string | Array<string>> = {}
  if (at === -1) return out
  for (const [key, value] of new URLSearchParams(url.slice(at + 1))) {
    const previous = out[key]
    out[key] = previous === undefined ? value : Array.isArray(previous) ? [...previous, value] : [previous, value]
  }
  return out
}

/** Past the request and head limits of the server middleware, the fallback answers. */
const oversized = (request: Request): boolean => headOverLimit(request.url, request.headers) !== undefined

type Answering = (request: Request) => Response | Promise<Response>

/**
 * Answers a request: at once when nothing had to wait (Bun serves a `Response` sooner than a promise of one).
 *
 * `routes` are the same direct routes in the shape of `Bun.serve`'s `routes` (Bun matches them natively, which is
 * cheaper than its `fetch` path), each path with every method: the undeclared ones go to the dispatcher, so to the
 * HttpApi app. The server gives Bun `routes` and the dispatcher as `fetch`; the tests call the dispatcher, which
 * matches the same table, and a test checks that both routings answer alike.
 */
export interface Dispatcher extends Answering {
  readonly routes: Record<string, Record<string, (request: Request & { readonly params: Record<string, string> }) => Response | Promise<Response>>>
}

const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const

/** A dispatcher without direct routes. */
export const withoutRoutes = (answer: Answering): Dispatcher => Object.assign((request: Request) => answer(request), { routes: {} })

export const makeDispatcher = (options: DispatchOptions): Dispatcher => {
  const { fallback, implementations, requestLog } = options
  /**
   * Every line a request's fiber logs carries the request's id: every logger of the runtime is wrapped once here,
   * instead of setting a log annotation in each request's fiber (which copies the fiber's references, on every request,
   * for lines that are rarely written). While the fiber runs synchronously, inside `runWith`, the id is
   * `runningRequestId`; a fiber that is still running afterwards (it waits for something) is entered in `requestIds`.
   */
  let runningRequestId: string | undefined
  const requestIds = new Map<number, string>()
  const addRequestId = (options: Logger.Logger.Options<unknown>): Logger.Logger.Options<unknown> => {
    const requestId = runningRequestId ??
      (options.fiberId._tag === "Runtime" ? requestIds.get(options.fiberId.id) : undefined)
    return requestId === undefined
      ? options
      : { ...options, annotations: HashMap.set(options.annotations, "requestId", requestId) }
  }
  const runtime = Runtime.updateFiberRefs(options.runtime, (fiberRefs) =>
    FiberRefs.updateAs(fiberRefs, {
      fiberId: FiberId.none,
      fiberRef: FiberRef.currentLoggers,
      value: HashSet.map(
        FiberRefs.getOrDefault(fiberRefs, FiberRef.currentLoggers),
        (logger) => Logger.mapInputOptions(logger, addRequestId)
      )
    }))
  const runFork = Runtime.runFork(runtime)
  /** Starts a fiber for the request with this id; see `addRequestId`. */
  const runWith = <A, E>(requestId: string, effect: Effect.Effect<A, E>) => {
    runningRequestId = requestId
    try {
      const fiber = runFork(effect)
      if (fiber.unsafePoll() === null) {
        requestIds.set(fiber.id().id, requestId)
        fiber.addObserver(() => requestIds.delete(fiber.id().id))
      }
      return fiber
    } finally {
      runningRequestId = undefined
    }
  }
  const logRequests = LogLevel.greaterThanEqual(
    LogLevel.Info,
    FiberRefs.getOrDefault(runtime.fiberRefs, FiberRef.currentMinimumLogLevel)
  )
  const routes: Array<Route> = []

  HttpApi.reflect(options.api as HttpApi.HttpApi.AnyWithProps, {
    onGroup: () => {},
    onEndpoint: ({ endpoint: e, errors, group, middleware, successes }) => {
      const endpoint = e as unknown as HttpApiEndpoint.HttpApiEndpoint.AnyWithProps
      const groupHandlers = implementations.handlers[group.identifier] as Record<string, SharedHandler> | undefined
      const handler = groupHandlers?.[endpoint.name]
      if (handler === undefined || endpoint.headersSchema._tag === "Some" || successes.size !== 1) return
      const hasBody = endpoint.method !== "GET" && endpoint.method !== "HEAD" && endpoint.method !== "OPTIONS"
      if (endpoint.payloadSchema._tag === "Some") {
        const payloadAst = endpoint.payloadSchema.value.ast
        if (!hasBody || HttpApiSchema.getEncoding(payloadAst).kind !== "Json") return
        if (HttpApiSchema.getMultipart(payloadAst) !== undefined) return
        if (HttpApiSchema.getMultipartStream(payloadAst) !== undefined) return
      }

      // Middleware: the security checks and header-adding middleware known here; anything else keeps the endpoint out.
      const checks: Array<(authorization: string | null) => Effect.Effect<{ readonly id: string }, unknown>> = []
      const middlewareHeaders: Record<string, string> = {}
      for (const tag of middleware) {
        const check = implementations.security.get(tag)
        const headers = implementations.headers.get(tag)
        if (check !== undefined) checks.push(check)
        else if (headers !== undefined) Object.assign(middlewareHeaders, headers)
        else return
      }
      if (checks.length > 1) return

      // The success: its status and encoding from the declaration; values encoded only if the schema transforms.
      const [status, success] = [...successes][0]
      if (Option.isSome(success.ast) && HttpApiSchema.getEncoding(success.ast.value).kind !== "Json") return
      const successSchema = Option.map(success.ast, (ast) => Schema.make(ast))
      const encodeSuccess: (value: unknown) => string | null = Option.match(successSchema, {
        onNone: () => () => null,
        onSome: (schema) => {
          if (!transforms(schema.ast)) return (value) => JSON.stringify(value)
          const encode = Schema.encodeSync(schema as Schema.Schema<unknown, unknown>)
          return (value) => JSON.stringify(encode(value))
        }
      })
      // The failures: each declared error schema with its status.
      const failures = [...errors].flatMap(([status, { ast }]) =>
        Option.isNone(ast) ? [] : [{
          status,
          is: Schema.is(Schema.make(ast.value)),
          encode: Schema.encodeSync(Schema.make(ast.value) as Schema.Schema<unknown, unknown>)
        }]
      )

      const decodePath = Option.map(endpoint.pathSchema, (s) => Schema.decodeUnknownEither(s as Schema.Schema<unknown, unknown>))
      const decodeQuery = Option.map(
        endpoint.urlParamsSchema,
        (s) => Schema.decodeUnknownEither(s as Schema.Schema<unknown, unknown>)
      )
      const decodePayload = Option.map(
        endpoint.payloadSchema,
        (s) => Schema.decodeUnknownEither(s as Schema.Schema<unknown, unknown>)
      )
      const check = checks[0]

      const serve = (request: Request, params: Record<string, string>, started: number): Response | Promise<Response> => {
        // The body: declared length within the limit, JSON that `readJsonBody` accepts; none on GET. Anything else is
        // the fallback's to answer (413, 415, 400, a chunked body, …), with the bytes as they came.
        const length = request.headers.get("content-length")
        if (length === null) {
          return hasBody || request.headers.has("transfer-encoding") ? fallback(request) : answer(request, params, started, undefined)
        }
        const size = Number(length)
        if (!(size <= MAX_BODY_BYTES) || (size > 0 && (!hasBody || !isJsonMediaType(request.headers.get("content-type") ?? undefined)))) {
          return fallback(request)
        }
        if (!hasBody || size === 0) return answer(request, params, started, undefined)
        return request.arrayBuffer().then((bytes) => {
          const read = readJsonBody(new Uint8Array(bytes))
          return "text" in read
            ? answer(request, params, started, read)
            : fallback(new Request(request.url, { method: request.method, headers: request.headers, body: bytes }))
        })
      }

      const answer = (
        request: Request,
        params: Record<string, string>,
        started: number,
        body: { readonly text: string; readonly json: unknown } | undefined
      ): Response | Promise<Response> => {
        const retry = () =>
          fallback(body === undefined ? request : new Request(request.url, {
            method: request.method,
            headers: request.headers,
            body: body.text
          }))

        const decoded: Decoded = {}
        if (decodePath._tag === "Some") {
          const result = decodePath.value(params)
          if (Either.isLeft(result)) return retry()
          decoded.path = result.right
        }
        if (decodeQuery._tag === "Some") {
          const result = decodeQuery.value(queryOf(request.url))
          if (Either.isLeft(result)) return retry()
          decoded.urlParams = result.right
        }
        if (decodePayload._tag === "Some") {
          // Parsed once, by `readJsonBody`, with the checks the middleware makes.
          if (body === undefined) return retry()
          const result = decodePayload.value(body.json)
          if (Either.isLeft(result)) return retry()
          decoded.payload = result.right
        }

        const requestId = requestIdOf(request.headers.get("x-request-id"))
        const headers: Record<string, string> = {
          "content-type": "application/json",
          ...middlewareHeaders,
          "x-request-id": requestId,
          ...PROTECTIVE_HEADERS
        }
        let keyId: string | undefined

        const answered: Effect.Effect<Answer<unknown>, unknown> = check === undefined
          ? handler(decoded)
          : Effect.flatMap(check(request.headers.get("authorization")), (key) => {
            keyId = key.id
            return handler(decoded)
          })

        const respond = (exit: Exit.Exit<Answer<unknown>, unknown>): Response => {
          if (Exit.isSuccess(exit)) {
            const body = encodeSuccess(exit.value.value)
            if (exit.value.headers !== undefined) Object.assign(headers, exit.value.headers)
            if (body === null) delete headers["content-type"]
            return new Response(body, { status, headers })
          }
          const failure = Cause.failureOption(exit.cause)
          if (Option.isSome(failure)) {
            const error = failure.value
            for (const declared of failures) {
              if (!declared.is(error)) continue
              const extra = implementations.errorHeaders(error)
              if (extra !== undefined) Object.assign(headers, extra)
              return new Response(JSON.stringify(declared.encode(error)), { status: declared.status, headers })
            }
          }
          if (Cause.isInterruptedOnly(exit.cause)) return new Response(INTERRUPTED, { status: 503, headers })
          runWith(requestId, Effect.logError("unexpected failure", exit.cause))
          return new Response(SERVER_ERROR, { status: 500, headers })
        }

        const finish = (exit: Exit.Exit<Answer<unknown>, unknown>): Response => {
          const response = respond(exit)
          if (!logRequests) return response
          const durationMs = Math.round((performance.now() - started) * 100) / 100
          const path = pathOf(request.url)
          if (requestLog !== undefined) {
            requestLog({
              requestId,
              method: request.method,
              path,
              status: response.status,
              durationMs,
              keyId,
              fiberId: fiber.id().id
            })
          } else {
            runWith(
              requestId,
              Effect.logInfo("request").pipe(Effect.annotateLogs({
                method: request.method,
                path,
                status: response.status,
                durationMs,
                ...(keyId === undefined ? {} : { keyId })
              }))
            )
          }
          return response
        }

        // The request's own fiber runs the check and the handler; the answer is made from its exit.
        const fiber = runWith(requestId, answered)
        const done = fiber.unsafePoll()
        if (done !== null) return finish(done)
        return new Promise((resolve) => fiber.addObserver((exit) => resolve(finish(exit))))
      }

      routes.push({ method: endpoint.method, path: endpoint.path, match: matcher(endpoint.path), serve })
    }
  })

  const dispatch: Answering = (request) => {
    const started = performance.now()
    const method = request.method
    const path = pathOf(request.url)
    for (const route of routes) {
      if (route.method !== method) continue
      const params = route.match(path)
      if (params === undefined) continue
      if (oversized(request)) break
      return route.serve(request, params, started)
    }
    return fallback(request)
  }

  const bunRoutes: Dispatcher["routes"] = {}
  for (const route of routes) {
    const methods = bunRoutes[route.path] ??= Object.fromEntries(METHODS.map((method) => [method, dispatch]))
    methods[route.method] = (request) => {
      const started = performance.now()
      return oversized(request) ? fallback(request) : route.serve(request, request.params, started)
    }
  }
  return Object.assign(dispatch, { routes: bunRoutes })
}
