/**
 * The `Authorization` middleware: the bearer key, then its quota. The scheme is matched case-insensitively, the key
 * looked up by the id it carries and compared by hash in constant time; a refusal is a 401 with
 * `WWW-Authenticate: Bearer`. A key that passed then counts one request against its quota (`RateLimits`: 429 past it).
 * The quota is counted here rather than in a middleware of its own because HttpApi runs a group's later middleware
 * before the earlier ones, without what they provide (the key).
 */
import { HttpServerRequest } from "@effect/platform"
import { Effect, Layer, Option, Redacted } from "effect"
import type { AuthenticatedKey } from "../Domain/ApiKey.js"
import { type Unauthorized, unauthorized, type Unavailable } from "../Domain/Errors.js"
import { annotateRequest } from "../Logging.js"
import { RateLimits } from "../RateLimit/RateLimits.js"
import { addResponseHeaders } from "../ResponseHeaders.js"
import { orUnavailable } from "../Unavailable.js"
import { Authorization } from "./Api.js"
import { ApiKeys } from "./ApiKeys.js"

const BEARER = /^bearer +([^\s]+) *$/i

/** The challenge every 401 carries (RFC 6750). */
export const CHALLENGE_HEADERS: Readonly<Record<string, string>> = { "www-authenticate": "Bearer realm=\"petstore\"" }

/** The key an `Authorization` header stands for: a 401 for a missing, malformed or unknown key. */
const checkHeader = (keys: ApiKeys, header: string | undefined) => {
  if (header === undefined) return Effect.fail(unauthorized())
  const token = BEARER.exec(header)?.[1]
  if (token === undefined) return Effect.fail(unauthorized("The Authorization header must be 'Bearer <API_KEY>'."))
  return Effect.flatMap(
    orUnavailable(keys.authenticate(Redacted.make(token))),
    (key) => Option.isNone(key) ? Effect.fail(unauthorized("The API key is not valid.")) : Effect.succeed(key.value)
  )
}

export const AuthorizationLive = Layer.effect(
  Authorization,
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    const rateLimits = yield* RateLimits
    /** The key, then its quota; the request's log lines name the key that authenticated it (never the key). */
    const authorize = (
      token: Redacted.Redacted<string>
    ): Effect.Effect<AuthenticatedKey, Unauthorized | Unavailable | RateLimitedOf> =>
      Effect.flatMap(Effect.serviceOption(HttpServerRequest.HttpServerRequest), (request) => {
        const header = Option.isSome(request) ? request.value.headers.authorization : `Bearer ${Redacted.value(token)}`
        return checkHeader(keys, header).pipe(
          Effect.tapErrorTag("Unauthorized", () => addResponseHeaders(CHALLENGE_HEADERS)),
          Effect.tap((key) => annotateRequest("keyId", key.id)),
          Effect.tap((key) => rateLimits.consume(key.id))
        )
      })
    return { bearerAuth: authorize }
  })
).pipe(Layer.provide(RateLimits.Default))

type RateLimitedOf = Effect.Effect.Error<ReturnType<RateLimits["consume"]>>
