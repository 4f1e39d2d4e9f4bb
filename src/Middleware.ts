/**
 * The middleware of the server, in two rings.
 *
 * - `makeApiMiddleware` runs inside the HttpApi app, around every route. Before any route runs it refuses bodies over
 *   64 KiB, paths the route table does not know, bodies on GET, and bodies that are not UTF-8 JSON within the limits of
 *   `JsonBody`; and it turns every failure that the API does not encode itself (a failed decode, an unknown route or
 *   method, a defect) into the contract's `{code, message, status}` body. Typed API errors pass through to the API's
 *   own encoder.
 * - `makeServerMiddleware` wraps the finished app, so it sees every final response: it refuses request targets and
 *   headers over 8 KiB, gives each response an `X-Request-Id` and the protective headers, applies CORS when
 *   configured, and writes the one log line of the request.
 */
import {
  HttpApi,
  HttpApiError,
  HttpApp,
  HttpMethod,
  HttpMiddleware,
  HttpServerError,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { Cause, Effect, Exit, FiberRef, identity, Option, Stream } from "effect"
import { globalValue } from "effect/GlobalValue"
import { randomUUID } from "node:crypto"
import { ServedApi } from "./Api.js"
import { type ErrorCode, errorBody, isApiError } from "./Domain/Errors.js"
import { isJsonMediaType, readJsonBody } from "./JsonBody.js"

export const MAX_BODY_BYTES = 64 * 1024
/**
 * The longest request target (path and query) answered: RFC 9112 §3 asks for at least 8000 octets, and the longest
 * URL the API builds is under 100. Longer ones are 414 up to Bun's own limit of 16 KiB for the request line and the
 * headers together, past which Bun answers 431 before the application runs.
 */
export const MAX_URL_LENGTH = 8 * 1024
const MAX_MESSAGE_LENGTH = 300
const REQUEST_ID = /^[\x21-\x7e]{1,128}$/

/** The request's id: the client's own when it is 1 to 128 visible characters, otherwise a new one. */
export const requestIdOf = (sent: string | null | undefined): string =>
  sent !== null && sent !== undefined && REQUEST_ID.test(sent) ? sent : randomUUID()

/** What every response carries besides its request id. */
export const PROTECTIVE_HEADERS = { "x-content-type-options": "nosniff", "cache-control": "no-store" } as const

export const errorResponse = (status: number, code: ErrorCode, message: string, headers?: Record<string, string>) =>
  HttpServerResponse.unsafeJson(errorBody(status, code, message), { status, ...(headers ? { headers } : {}) })

/** The methods each route answers, derived from the API declaration plus the server's own GET routes. */
const makeRouteTable = (extraGetPaths: ReadonlyArray<string>) => {
  const routes: Array<{ readonly path: string; readonly pattern: RegExp; readonly methods: Set<string> }> = []
  const add = (path: string, method: string) => {
    const existing = routes.find((route) => route.path === path)
    if (existing) existing.methods.add(method)
    else {
      const source = "^" + path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/:\w+/g, "[^/]+") + "/?$"
      routes.push({ path, pattern: new RegExp(source), methods: new Set([method]) })
    }
  }
  HttpApi.reflect(ServedApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => add(endpoint.path, endpoint.method)
  })
  for (const path of extraGetPaths) add(path, "GET")
  return (path: string): ReadonlyArray<string> => {
    const route = routes.find((candidate) => candidate.pattern.test(path))
    return route === undefined ? [] : [...route.methods, ...(route.methods.has("GET") ? ["HEAD"] : [])]
  }
}

/** The path of a request URL (absolute or not), without its query string: no URL parsing on every request. */
export const pathOf = (url: string): string => {
  const start = url.charCodeAt(0) === 47 ? 0 : url.indexOf("/", url.indexOf("://") + 3)
  if (start === -1) return "/"
  const query = url.indexOf("?", start)
  return query === -1 ? url.slice(start) : url.slice(start, query)
}

const truncate = (text: string) => text.length > MAX_MESSAGE_LENGTH ? text.slice(0, MAX_MESSAGE_LENGTH - 1) + "…" : text

/** A 400 that names the field and says why, and whether the body, the query or the path was wrong. */
const decodeFailure = (request: HttpServerRequest.HttpServerRequest, error: HttpApiError.HttpApiDecodeError) => {
  const issue = error.issues[0]
  const field = issue?.path.map(String).join(".") ?? ""
  const reason = truncate(issue?.message ?? error.message)
  if (request.method !== "GET" && request.method !== "HEAD") {
    const message = field === ""
      ? "The request body must be a JSON object with a name and a categoryId."
      : `Invalid request body: '${field}' ${reason.startsWith("is missing") ? "is missing" : `is invalid: ${reason}`}`
    return errorResponse(400, "invalid_body", message)
  }
  const query = new URL(request.url, "http://localhost").searchParams
  const name = String(issue?.path[0] ?? "")
  const where = query.has(name) ? "query parameter" : "path parameter"
  return errorResponse(
    400,
    where === "query parameter" ? "invalid_query" : "invalid_path",
    `Invalid ${where} '${field}': ${query.getAll(name).length > 1 ? "it is given more than once" : reason}`
  )
}

/** The body, or undefined once it passes the limit (reading stops there). An unreadable body counts as empty. */
const readBounded = (request: HttpServerRequest.HttpServerRequest): Effect.Effect<Buffer | undefined> =>
  request.stream.pipe(
    Stream.runFoldWhile(
      { size: 0, chunks: [] as Array<Uint8Array> },
      (read) => read.size <= MAX_BODY_BYTES,
      (read, chunk) => ({ size: read.size + chunk.byteLength, chunks: [...read.chunks, chunk] })
    ),
    Effect.map((read) => (read.size > MAX_BODY_BYTES ? undefined : Buffer.concat(read.chunks))),
    Effect.orElseSucceed(() => Buffer.alloc(0))
  )

/** The same request with its body already read, and its length declared. */
const withBody = (request: HttpServerRequest.HttpServerRequest, body: Uint8Array) => {
  const headers = new Headers(request.headers as Record<string, string>)
  headers.delete("transfer-encoding")
  headers.set("content-length", String(body.byteLength))
  return HttpServerRequest.fromWeb(
    new Request(new URL(request.url, "http://localhost").href, { method: request.method, headers, body })
  )
}

const tooLarge = errorResponse(413, "payload_too_large", `The request body is over ${MAX_BODY_BYTES} bytes.`)

const unsupportedMediaType = errorResponse(
  415,
  "unsupported_media_type",
  "The request body must be sent as application/json (UTF-8), and say so in its Content-Type."
)

/** The path as the router resolves it (dot segments resolved), to check it against the route table. */
const routedPathOf = (request: HttpServerRequest.HttpServerRequest) => new URL(request.url, "http://localhost").pathname

/**
 * The body of a request to a route that takes one: JSON (415 otherwise), at most 64 KiB (413), and well-formed JSON
 * within the limits of `JsonBody` (400 `invalid_json`), checked before authentication and before the API decodes it.
 * Read in full up to the limit, never further, then handed on with its length declared.
 */
const checkBody = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const contentType = request.headers["content-type"]
    const notJson = !isJsonMediaType(contentType)
    // A declared length is refused unread; a body of unknown length once it is read.
    if (notJson && Number(request.headers["content-length"] ?? 0) > 0) return unsupportedMediaType
    const body = yield* readBounded(request)
    if (body === undefined) return tooLarge
    if (notJson && body.byteLength > 0) return unsupportedMediaType
    const read = readJsonBody(body)
    if ("problem" in read) return errorResponse(400, "invalid_json", read.problem)
    return withBody(request, body)
  })

export const makeApiMiddleware = (extraGetPaths: ReadonlyArray<string>) => {
  const allowedMethods = makeRouteTable(extraGetPaths)

  const unexpected = (cause: Cause.Cause<unknown>) =>
    Effect.as(
      Effect.logError("unexpected failure", cause),
      errorResponse(500, "internal_error", "The server failed to answer this request; it has been logged.")
    )

  const notFound = (request: HttpServerRequest.HttpServerRequest) => {
    const path = routedPathOf(request)
    const methods = allowedMethods(path)
    // The route answers this method, yet the router found none: a path parameter it could not take.
    if (methods.includes(request.method)) {
      return errorResponse(400, "invalid_path", `Invalid path parameter in ${truncate(path)}: it cannot be read.`)
    }
    return methods.length === 0
      ? errorResponse(404, "not_found", `Nothing is served at ${truncate(path)}.`)
      : errorResponse(405, "method_not_allowed", `${request.method} is not allowed here; use ${methods.join(", ")}.`, {
        allow: methods.join(", ")
      })
  }

  return <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const length = request.headers["content-length"]
      if (length !== undefined && Number(length) > MAX_BODY_BYTES) return tooLarge
      // RFC 9112 §3.2: a request target has no fragment. Bun keeps one in the URL; the query parser would read it into a
      // value, the router would drop it.
      if (request.url.includes("#")) {
        return errorResponse(400, "bad_request", "A request target has no fragment (the part from '#').")
      }
      // Only the paths of the route table reach the router, which would also take other spellings of them (another
      // case, doubled slashes, percent-encoded letters, and a `;` as the start of a query: `/pets/1;x` for pet 1),
      // and so let requests around the checks below. Whatever the body, a 404 or a 405 is answered without reading it.
      const path = routedPathOf(request)
      if (path.includes(";") || !allowedMethods(path).includes(request.method)) return notFound(request)
      let served = request
      if (!HttpMethod.hasBody(request.method)) {
        // RFC 9110 §9.3.1: content in a GET has no meaning, and ignoring it is how requests get smuggled.
        if (Number(length ?? 0) > 0 || request.headers["transfer-encoding"] !== undefined) {
          return errorResponse(400, "bad_request", `A ${request.method} request has no body; send it without one.`)
        }
      } else {
        const checked = yield* checkBody(request)
        if (HttpServerResponse.isServerResponse(checked)) return checked
        served = checked
      }

      return yield* app.pipe(
        Effect.provideService(HttpServerRequest.HttpServerRequest, served),
        Effect.catchAllCause((cause): Effect.Effect<HttpServerResponse.HttpServerResponse, E> => {
          const failure = Cause.failureOption(cause)
          if (Option.isSome(failure)) {
            const error: unknown = failure.value
            if (isApiError(error)) return Effect.failCause(cause as Cause.Cause<E>)
            if (error instanceof HttpApiError.HttpApiDecodeError) return Effect.succeed(decodeFailure(request, error))
            if (error instanceof HttpServerError.RouteNotFound) return Effect.succeed(notFound(request))
            if (error instanceof HttpServerError.RequestError) return Effect.succeed(requestError(error))
            return unexpected(cause)
          }
          if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<E>)
          const defect = Cause.squash(cause)
          if (defect instanceof HttpServerError.RequestError) return Effect.succeed(requestError(defect))
          return unexpected(cause)
        })
      )
    })
}

/** The body could not be read or parsed as JSON. */
const requestError = (error: HttpServerError.RequestError) =>
  error.reason === "Decode"
    ? errorResponse(400, "invalid_json", "The request body is not valid JSON.")
    : errorResponse(400, "bad_request", "The request could not be read.")

/** The key id a request authenticated with, set by the authorization check, for the request's log line. */
export const currentKeyId = globalValue(
  Symbol.for("petstore/Middleware/currentKeyId"),
  () => FiberRef.unsafeMake<string | undefined>(undefined)
)

export interface ServerMiddlewareOptions {
  /** `Some` enables CORS for these origins (`["*"]`: any origin); `None` leaves it off. */
  readonly corsOrigins: Option.Option<ReadonlyArray<string>>
}

/** The headers' limit, below Bun's own (16 KiB with the request line, answered with a bare 431): an Error body. */
export const MAX_HEADER_BYTES = 8 * 1024

/** Which limit a request's head passes, if any: 414 for its target, 431 for its headers. */
export const headOverLimit = (url: string, headers: Iterable<readonly [string, string]>): 414 | 431 | undefined => {
  if (url.length > MAX_URL_LENGTH) return 414
  let size = 0
  for (const [name, value] of headers) size += name.length + value.length + 4
  return size > MAX_HEADER_BYTES ? 431 : undefined
}

const refuseOversized = (request: HttpServerRequest.HttpServerRequest) => {
  switch (headOverLimit(request.url, Object.entries(request.headers))) {
    case 414:
      return errorResponse(414, "uri_too_long", `The request target is over ${MAX_URL_LENGTH} characters.`)
    case 431:
      return errorResponse(431, "header_too_large", `The request headers are over ${MAX_HEADER_BYTES} bytes.`)
    default:
      return undefined
  }
}

const EXPOSED_HEADERS = ["link", "location", "x-request-id", "deprecation", "sunset", "www-authenticate", "allow"]

export const makeServerMiddleware = (options: ServerMiddlewareOptions) => {
  const cors: HttpMiddleware.HttpMiddleware = Option.match(options.corsOrigins, {
    onNone: (): HttpMiddleware.HttpMiddleware => identity,
    onSome: (origins) =>
      HttpMiddleware.cors({
        allowedOrigins: origins.includes("*") ? [] : origins,
        allowedMethods: ["GET", "HEAD", "POST"],
        allowedHeaders: ["authorization", "content-type", "x-request-id"],
        exposedHeaders: EXPOSED_HEADERS,
        maxAge: 600
      })
  })

  return <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const started = performance.now()
      const requestId = requestIdOf(request.headers["x-request-id"])
      yield* HttpApp.appendPreResponseHandler((_request, response) =>
        Effect.succeed(HttpServerResponse.setHeaders(response, { "x-request-id": requestId, ...PROTECTIVE_HEADERS }))
      )
      const refusal = refuseOversized(request)
      return yield* (refusal === undefined ? cors(app) : Effect.succeed(refusal)).pipe(
        Effect.onExit((exit) =>
          Effect.flatMap(FiberRef.get(currentKeyId), (keyId) =>
            Effect.logInfo("request").pipe(
              Effect.annotateLogs({
                method: request.method,
                // The path alone: a query string could carry what does not belong in a log.
                path: pathOf(request.url),
                status: Exit.isSuccess(exit) ? exit.value.status : Cause.isInterruptedOnly(exit.cause) ? 503 : 500,
                durationMs: Math.round((performance.now() - started) * 100) / 100,
                ...(keyId === undefined ? {} : { keyId })
              })
            ))
        ),
        Effect.annotateLogs("requestId", requestId)
      )
    })
}
