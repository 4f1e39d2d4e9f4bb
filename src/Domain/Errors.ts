/**
 * Every error the service answers is the interface's `Error` object on the wire, `{ code, message, status }` with
 * `status` the HTTP status. Inside the program each is a `Schema.TaggedError`; its `...Response` schema transforms
 * between the two, carries the status for `HttpApi`, and makes the OpenAPI document refer to the one `Error` schema.
 */
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"

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
  | "origin_not_allowed"
  | "payload_too_large"
  | "unsupported_media_type"
  | "idempotency_key_in_use"
  | "idempotency_key_reused"
  | "feed_position_gone"
  | "too_many_streams"
  | "slow_consumer"
  | "rate_limited"
  | "header_too_large"
  | "uri_too_long"
  | "internal_error"
  | "unavailable"
  | "client_closed_request"

const fields = { code: Schema.String, message: Schema.String }

export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", fields) {}
export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", fields) {}
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fields) {}
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", fields) {}
export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()("UnsupportedMediaType", fields) {}
export class IdempotencyKeyInUse extends Schema.TaggedError<IdempotencyKeyInUse>()("IdempotencyKeyInUse", fields) {}
export class IdempotencyKeyReused extends Schema.TaggedError<IdempotencyKeyReused>()("IdempotencyKeyReused", fields) {}
export class FeedPositionGone extends Schema.TaggedError<FeedPositionGone>()("FeedPositionGone", fields) {}
export class TooManyStreams extends Schema.TaggedError<TooManyStreams>()("TooManyStreams", fields) {}
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", fields) {}
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", fields) {}

export const unauthorized = (message = "A valid API key is required: send it as 'Authorization: Bearer <API_KEY>'.") =>
  new Unauthorized({ code: "unauthorized", message })

export const petNotFound = (id: number) => new NotFound({ code: "not_found", message: `No pet has the id ${id}.` })

export const idempotencyKeyInUse = () =>
  new IdempotencyKeyInUse({
    code: "idempotency_key_in_use",
    message: "A request with this Idempotency-Key is still being processed; retry after the time in Retry-After."
  })

export const idempotencyKeyReused = () =>
  new IdempotencyKeyReused({
    code: "idempotency_key_reused",
    message: "This Idempotency-Key was already used with a different request body; use a new key for a new request."
  })

export const feedPositionGone = () =>
  new FeedPositionGone({
    code: "feed_position_gone",
    message: "The feed cannot resume from this position (malformed, from another database, or ahead of the feed); " +
      "list the pets again and follow from the list's Feed-Position."
  })

export const tooManyStreams = (limit: number) =>
  new TooManyStreams({
    code: "too_many_streams",
    message: `This API key has ${limit} change streams open, as many as it may (FEED_STREAMS_PER_KEY); close one, ` +
      `or retry after Retry-After seconds.`
  })

export const rateLimited = (seconds: number) =>
  new RateLimited({
    code: "rate_limited",
    message: `This API key has used up its request quota; retry in ${seconds} second${seconds === 1 ? "" : "s"}.`
  })

/** The largest request body the service reads. */
export const MAX_BODY_BYTES = 64 * 1024

export const payloadTooLarge = () =>
  new PayloadTooLarge({ code: "payload_too_large", message: `The request body is over ${MAX_BODY_BYTES} bytes.` })

export const unsupportedMediaType = () =>
  new UnsupportedMediaType({
    code: "unsupported_media_type",
    message: "The request body must be sent as application/json (UTF-8), and say so in its Content-Type."
  })

export const unavailable = (message = "The service cannot reach its database; try again shortly.") =>
  new Unavailable({ code: "unavailable", message })

export const ErrorBody = Schema.Struct({
  code: Schema.String.annotations({ description: "Machine-readable error code, lower-case snake case." }),
  message: Schema.String.annotations({ description: "Human-readable description." }),
  // The title replaces `Schema.Int`'s built-in "int", which code generators would otherwise take for a type name.
  status: Schema.Int.annotations({ title: "HTTP status", description: "The HTTP status code of the response." })
}).annotations({
  identifier: "Error",
  description: "An error: what went wrong, for machines and for people.",
  examples: [{ code: "not_found", message: petNotFound(42).message, status: 404 }]
})
export type ErrorBody = typeof ErrorBody.Type

/** The JSON body of an error answer. */
export const errorBody = (status: number, code: ErrorCode, message: string): ErrorBody => ({ code, message, status })

/** The wire form of a typed error: the `Error` body with this HTTP status. */
const wire = <A, I extends { readonly code: string; readonly message: string }>(
  self: Schema.Schema<A, I> & { readonly _tag: string },
  status: number,
  description: string
) =>
  Schema.transform(ErrorBody, self, {
    strict: false,
    decode: (body) => ({ _tag: self._tag, code: body.code, message: body.message }),
    encode: (error) => ({ code: error.code, message: error.message, status })
  }).annotations(HttpApiSchema.annotations({ status, description }))

export const UnauthorizedResponse = wire(Unauthorized, 401, "API key missing or invalid.")
export const BadRequestResponse = wire(BadRequest, 400, "The request is invalid: the message names the field.")
export const NotFoundResponse = wire(NotFound, 404, "The requested resource could not be found.")
export const PayloadTooLargeResponse = wire(PayloadTooLarge, 413, "The request body is over 64 KiB.")
export const UnsupportedMediaTypeResponse = wire(UnsupportedMediaType, 415, "The request body is not application/json.")
export const IdempotencyKeyInUseResponse = wire(
  IdempotencyKeyInUse,
  409,
  "A request with the same Idempotency-Key is still being processed; retry after `Retry-After` seconds."
)
export const IdempotencyKeyReusedResponse = wire(
  IdempotencyKeyReused,
  422,
  "The Idempotency-Key was already used with a different request body."
)
export const FeedPositionGoneResponse = wire(
  FeedPositionGone,
  410,
  "The feed cannot resume from this position: list again and follow from the list's `Feed-Position`."
)
export const TooManyStreamsResponse = wire(
  TooManyStreams,
  429,
  "The API key has as many change streams open as it may (`FEED_STREAMS_PER_KEY`); retry after `Retry-After` seconds."
)
export const RateLimitedResponse = wire(
  RateLimited,
  429,
  "The API key has used up its quota (`RateLimit-Policy`); retry after `Retry-After` seconds."
)
export const UnavailableResponse = wire(Unavailable, 503, "The database cannot be reached.")
