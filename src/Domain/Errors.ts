/**
 * Every error the service answers has one shape on the wire, the interface's `Error` object: `{ code, message, status }`,
 * with `status` equal to the HTTP status. Each typed error below is a yieldable class inside the program and that shape
 * outside of it: its `...Response` schema transforms between the two, carries the HTTP status for `HttpApi`, and makes the
 * OpenAPI document refer every error response to the one `Error` schema.
 */
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"

export const ErrorBody = Schema.Struct({
  code: Schema.String.annotations({ description: "Machine-readable error code, lower-case snake case." }),
  message: Schema.String.annotations({ description: "Human-readable description." }),
  // The title replaces `Schema.Int`'s built-in "int", which code generators would otherwise take for a type name.
  status: Schema.Int.annotations({ title: "HTTP status", description: "The HTTP status code of the response." })
}).annotations({
  identifier: "Error",
  description: "An error: what went wrong, for machines and for people.",
  examples: [{ code: "not_found", message: "No pet has the id 42.", status: 404 }]
})
export type ErrorBody = typeof ErrorBody.Type

/** The stable error codes of the contract. */
export type ErrorCode =
  | "unauthorized"
  | "bad_request"
  | "invalid_body"
  | "invalid_json"
  | "invalid_query"
  | "invalid_path"
  | "invalid_header"
  | "not_found"
  | "method_not_allowed"
  | "payload_too_large"
  | "unsupported_media_type"
  | "idempotency_key_in_use"
  | "idempotency_key_reused"
  | "rate_limited"
  | "header_too_large"
  | "uri_too_long"
  | "internal_error"
  | "unavailable"

const fields = { code: Schema.String, message: Schema.String }

export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", fields) {
  static readonly status = 401
}
export const unauthorized = (message = "A valid API key is required: send it as 'Authorization: Bearer <API_KEY>'.") =>
  new Unauthorized({ code: "unauthorized", message })

export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", fields) {
  static readonly status = 400
}

export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fields) {
  static readonly status = 404
}

export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", fields) {
  static readonly status = 413
}

export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()("UnsupportedMediaType", fields) {
  static readonly status = 415
}

/** A create with this Idempotency-Key is still running (on any replica): retry in a moment. */
export class IdempotencyKeyInUse extends Schema.TaggedError<IdempotencyKeyInUse>()("IdempotencyKeyInUse", fields) {
  static readonly status = 409
}
export const idempotencyKeyInUse = () =>
  new IdempotencyKeyInUse({
    code: "idempotency_key_in_use",
    message: "A request with this Idempotency-Key is still being processed; retry after the time in Retry-After."
  })

/** This Idempotency-Key was already used with another payload. */
export class IdempotencyKeyReused extends Schema.TaggedError<IdempotencyKeyReused>()("IdempotencyKeyReused", fields) {
  static readonly status = 422
}
export const idempotencyKeyReused = () =>
  new IdempotencyKeyReused({
    code: "idempotency_key_reused",
    message: "This Idempotency-Key was already used with a different request body; use a new key for a new request."
  })

/** The API key has used up its quota for the current window. */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", fields) {
  static readonly status = 429
}
export const rateLimited = (retryAfterSeconds: number) =>
  new RateLimited({
    code: "rate_limited",
    message: `This API key has used up its request quota; retry in ${retryAfterSeconds} second${
      retryAfterSeconds === 1 ? "" : "s"
    }.`
  })

export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", fields) {
  static readonly status = 503
}
export const unavailable = (message = "The service cannot reach its database; try again shortly.") =>
  new Unavailable({ code: "unavailable", message })

type Tagged = { readonly _tag: string; readonly code: string; readonly message: string }

/** The wire form of a typed error: the `Error` body with the class's HTTP status. */
const wire = <A extends Tagged, I extends Tagged>(
  self: Schema.Schema<A, I> & { readonly status: number },
  tag: I["_tag"],
  description: string
) =>
  Schema.transform(ErrorBody, self, {
    strict: false,
    decode: (body) => ({ _tag: tag, code: body.code, message: body.message }),
    encode: (error) => ({ code: error.code, message: error.message, status: self.status })
  }).annotations(HttpApiSchema.annotations({ status: self.status, description }))

export const UnauthorizedResponse = wire(Unauthorized, "Unauthorized", "API key missing or invalid.")
export const BadRequestResponse = wire(BadRequest, "BadRequest", "The request is invalid: the message names the field.")
export const NotFoundResponse = wire(NotFound, "NotFound", "The requested resource could not be found.")
export const PayloadTooLargeResponse = wire(PayloadTooLarge, "PayloadTooLarge", "The request body is over 64 KiB.")
export const UnsupportedMediaTypeResponse = wire(
  UnsupportedMediaType,
  "UnsupportedMediaType",
  "The request body is not application/json."
)
export const IdempotencyKeyInUseResponse = wire(
  IdempotencyKeyInUse,
  "IdempotencyKeyInUse",
  "A request with the same Idempotency-Key is still being processed; retry after `Retry-After` seconds."
)
export const IdempotencyKeyReusedResponse = wire(
  IdempotencyKeyReused,
  "IdempotencyKeyReused",
  "The Idempotency-Key was already used with a different request body."
)
export const RateLimitedResponse = wire(
  RateLimited,
  "RateLimited",
  "The API key has used up its quota (`RateLimit-Policy`); retry after `Retry-After` seconds."
)
export const UnavailableResponse = wire(Unavailable, "Unavailable", "The database cannot be reached.")

/** The JSON body of an error answer. */
export const errorBody = (status: number, code: ErrorCode, message: string): ErrorBody => ({ code, message, status })
