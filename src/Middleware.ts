/**
 * The middleware of the server, in two rings.
 *
 * - `makeApiMiddleware` runs inside the HttpApi app, around every route: it refuses bodies over 64 KiB and bodies
 *   that are not JSON before they are read, and turns every failure the API does not encode itself (a failed decode,
 *   malformed JSON, an unknown route or method, a defect) into the contract's `{code, message, status}` body. Typed API
 *   errors pass through to the API's own encoder.
 * - `makeServerMiddleware` wraps the finished app, so it sees every final response: it gives each an `X-Request-Id`
 *   and the protective headers, applies CORS when configured, and writes the one log line of the request.
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

export const MAX_BODY_BYTES = 64 * 1024
const MAX_MESSAGE_LENGTH = 300
export const REQUEST_ID = /^[\x21-\x7e]{1,128}$/

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
  const where = query.has(String(issue?.path[0] ?? "")) ? "query parameter" : "path parameter"
  return errorResponse(
    400,
    where === "query parameter" ? "invalid_query" : "invalid_path",
    `Invalid ${where} '${field}': ${reason}`
  )
}

const isJsonMediaType = (contentType: string) => {
  const type = contentType.split(";")[0].trim().toLowerCase()
  return type === "application/json" || /^application\/[\w.+-]+\+json$/.test(type)
}

/** The body, or undefined once it passes the limit (reading stops there). An unreadable body counts as empty. */
const readBounded = (request: HttpServerRequest.HttpServerRequest) =>
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

export const makeApiMiddleware = (extraGetPaths: ReadonlyArray<string>) => {
  const allowedMethods = makeRouteTable(extraGetPaths)

  const unexpected = (cause: Cause.Cause<unknown>) =>
    Effect.as(
      Effect.logError("unexpected failure", cause),
      errorResponse(500, "internal_error", "The server failed to answer this request; it has been logged.")
    )

  const notFound = (request: HttpServerRequest.HttpServerRequest) => {
    const path = new URL(request.url, "http://localhost").pathname
    const methods = allowedMethods(path)
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
      let served = request
      if (length === undefined && HttpMethod.hasBody(request.method)) {
        // A body of unknown length (chunked) is read up to the limit, never further, then handed on in full.
        const body = yield* readBounded(request)
        if (body === undefined) return tooLarge
        served = withBody(request, body)
      }
      const contentType = request.headers["content-type"]
      if (Number(served.headers["content-length"] ?? 0) > 0 && contentType !== undefined && !isJsonMediaType(contentType)) {
        return errorResponse(415, "unsupported_media_type", "The request body must be application/json.")
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

/** Limits on the request line and head, below Bun's own (16 KiB, answered with a bare 431), so they get an Error body. */
export const MAX_URL_BYTES = 8 * 1024
export const MAX_HEADER_BYTES = 8 * 1024

const refuseOversized = (request: HttpServerRequest.HttpServerRequest) => {
  if (request.url.length > MAX_URL_BYTES) {
    return errorResponse(414, "uri_too_long", `The request URL is over ${MAX_URL_BYTES} bytes.`)
  }
  let size = 0
  for (const name in request.headers) size += name.length + request.headers[name].length + 4
  return size > MAX_HEADER_BYTES
    ? errorResponse(431, "header_too_large", `The request headers are over ${MAX_HEADER_BYTES} bytes.`)
    : undefined
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
      const sent = request.headers["x-request-id"]
      const requestId = sent !== undefined && REQUEST_ID.test(sent) ? sent : randomUUID()
      yield* HttpApp.appendPreResponseHandler((_request, response) =>
        Effect.succeed(HttpServerResponse.setHeaders(response, {
          "x-request-id": requestId,
          "x-content-type-options": "nosniff",
          "cache-control": "no-store"
        }))
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
