/**
 * The answers the server gives itself, before or around the API's handlers: a request it refuses (a limit, a target, a
 * body, a failed decode, an unknown path or method), an unexpected failure, an interrupted request. One home for their
 * statuses, codes and texts, whichever path serves the request.
 */
import { HttpApiSchema, HttpServerResponse } from "@effect/platform"
import { type Cause, Effect, type ParseResult, type Schema } from "effect"
import * as Errors from "../Domain/Errors.js"
import { UNAVAILABLE_HEADERS } from "../Unavailable.js"

const refusal = (
  status: number,
  code: Errors.ErrorCode,
  message: string,
  headers?: Readonly<Record<string, string>>
) => ({
  status,
  code,
  message,
  headers
})

export type Refusal = ReturnType<typeof refusal>

/** The JSON body of a refusal: the interface's `Error` object. */
export const refusalBody = (refused: Refusal): string =>
  JSON.stringify(Errors.errorBody(refused.status, refused.code, refused.message))

/** A refusal as the platform's response, for the server's own routes. */
export const refusalResponse = (refused: Refusal): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.text(refusalBody(refused), {
    status: refused.status,
    contentType: "application/json",
    ...(refused.headers === undefined ? {} : { headers: refused.headers })
  })

/**
 * The longest request target (path and query) answered: RFC 9112 §3 asks for at least 8000 octets, and the longest
 * URL the API builds is under 100. Longer ones are 414 up to Bun's own limit of 16 KiB for the request line and the
 * headers together, past which Bun answers 431 before the application runs.
 */
export const MAX_URL_LENGTH = 8 * 1024
/** The headers' limit, below Bun's own (16 KiB with the request line, answered with a bare 431): an Error body. */
export const MAX_HEADER_BYTES = 8 * 1024
const MAX_MESSAGE_LENGTH = 300

const truncate = (text: string, max = MAX_MESSAGE_LENGTH) => text.length > max ? text.slice(0, max - 1) + "…" : text

export const uriTooLong = refusal(414, "uri_too_long", `The request target is over ${MAX_URL_LENGTH} characters.`)
export const headerTooLarge = refusal(
  431,
  "header_too_large",
  `The request headers are over ${MAX_HEADER_BYTES} bytes.`
)
export const fragment = refusal(400, "bad_request", "A request target has no fragment (the part from '#').")
/** A refusal that is one of the API's declared errors: its status as its wire schema gives it, its code and text. */
const declared = (
  wire: Schema.Schema.Any,
  { code, message }: { readonly code: string; readonly message: string }
) => refusal(HttpApiSchema.getStatusError(wire), code as Errors.ErrorCode, message)

export const payloadTooLarge = declared(Errors.PayloadTooLargeResponse, Errors.payloadTooLarge())
export const unsupportedMediaType = declared(Errors.UnsupportedMediaTypeResponse, Errors.unsupportedMediaType())
export const bodyOnMethod = (method: string) =>
  refusal(400, "bad_request", `A ${method} request has no body; send it without one.`)
export const unreadableBody = refusal(400, "bad_request", "The request could not be read.")
export const invalidJson = (problem: string) => refusal(400, "invalid_json", problem)
export const notFound = (path: string) => refusal(404, "not_found", `Nothing is served at ${truncate(path)}.`)
export const methodNotAllowed = (method: string, allowed: ReadonlyArray<string>) =>
  refusal(405, "method_not_allowed", `${method} is not allowed here; use ${allowed.join(", ")}.`, {
    allow: allowed.join(", ")
  })
/** A CORS preflight from an origin `CORS_ORIGINS` does not list: no CORS headers, so the browser stops there. */
export const originNotAllowed = (origin: string) =>
  refusal(403, "origin_not_allowed", `The origin ${truncate(origin)} is not allowed: CORS_ORIGINS does not list it.`)
export const unreadablePath = (path: string) =>
  refusal(400, "invalid_path", `Invalid path parameter in ${truncate(path)}: it cannot be read.`)
export const internalError = refusal(
  500,
  "internal_error",
  "The server failed to answer this request; it has been logged."
)
/** How the cause of an `internalError` is logged, whatever answers it: as unexpected, the whole cause. */
export const logUnexpected = (cause: Cause.Cause<unknown>) => Effect.logError("unexpected failure", cause)
/** A request whose client went away before its answer: the answer reaches no one; its log line says what happened. */
export const clientGone = refusal(499, "client_closed_request", "The client closed the request before its answer.")
export const shuttingDown = refusal(503, "unavailable", "The server is shutting down.", UNAVAILABLE_HEADERS)
/** A request whose own effects interrupted it before it had an answer. */
export const interrupted = refusal(
  503,
  "unavailable",
  "The request was interrupted before its answer; try again shortly.",
  UNAVAILABLE_HEADERS
)
export const deadlineExceeded = refusal(
  503,
  "unavailable",
  "The request did not finish within the time the server allows; try again shortly.",
  UNAVAILABLE_HEADERS
)

/** Which part of the request a failed decode was about. */
export type DecodedPart = "path" | "query" | "body" | "header"

/** The longest message listing a body's invalid fields: each field's reason is cut at `MAX_MESSAGE_LENGTH` too. */
const MAX_BODY_MESSAGE_LENGTH = 3 * MAX_MESSAGE_LENGTH

/**
 * A 400 for a failed decode that names the field and says why (the field's path and reason as Effect's
 * `ArrayFormatter` and `HttpApiDecodeError` give them): for a path, a query or a header the first issue of the
 * decoder's; for a body, every invalid field (its decoder reports them all), each once, in the schema's order.
 * `repeated` tells whether a query parameter was sent more than once; `bodyShape` is what the endpoint's payload must
 * be ("a JSON object with a name and a categoryId"), for a body that is not that at all.
 */
export const decodeFailure = (
  part: DecodedPart,
  issues: ReadonlyArray<ParseResult.ArrayFormatterIssue>,
  repeated: (name: string) => boolean,
  bodyShape = "JSON of the form the endpoint declares"
): Refusal => {
  const fieldOf = (issue: ParseResult.ArrayFormatterIssue | undefined) => issue?.path.map(String).join(".") ?? ""
  const reasonOf = (issue: ParseResult.ArrayFormatterIssue | undefined) =>
    truncate(issue?.message ?? "it cannot be read")
  const [first] = issues
  const field = fieldOf(first)
  if (part === "header") return refusal(400, "invalid_header", `Invalid header '${field}': ${reasonOf(first)}`)
  if (part === "path") return refusal(400, "invalid_path", `Invalid path parameter '${field}': ${reasonOf(first)}`)
  if (part === "query") {
    const why = repeated(String(first?.path[0] ?? "")) ? "it is given more than once" : reasonOf(first)
    return refusal(400, "invalid_query", `Invalid query parameter '${field}': ${why}`)
  }
  if (issues.length === 0 || issues.some((issue) => issue.path.length === 0)) {
    return refusal(400, "invalid_body", `The request body must be ${bodyShape}.`)
  }
  // A field's first issue says why; the others on the same field repeat it in the schema's terms.
  const byField = new Map<string, string>()
  for (const issue of issues) {
    const name = fieldOf(issue)
    if (byField.has(name)) continue
    const reason = reasonOf(issue)
    byField.set(name, `'${name}' ${reason.startsWith("is missing") ? "is missing" : `is invalid: ${reason}`}`)
  }
  const listed = `Invalid request body: ${[...byField.values()].join("; ")}`
  return refusal(
    400,
    "invalid_body",
    truncate(listed, MAX_BODY_MESSAGE_LENGTH)
  )
}

/** A request the pipeline refuses itself (a failed decode), carried through the fiber's error channel. */
export class Refused {
  readonly _tag = "Refused"
  constructor(readonly refusal: Refusal) {}
}
