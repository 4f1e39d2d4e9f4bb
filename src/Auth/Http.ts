/**
 * The bearer check behind `Authorization`: the scheme is matched case-insensitively, the key looked up by the id it
 * carries and compared by hash in constant time. A refusal is a 401 with `WWW-Authenticate: Bearer`. A key that passed
 * then counts one request against its quota (`RateLimits`: 429 past it).
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

/** The token of an `Authorization: Bearer <token>` header, if the header is one. */
export const bearerToken = (header: string | undefined): Option.Option<Redacted.Redacted<string>> => {
  const match = header === undefined ? null : BEARER.exec(header)
  return match === null ? Option.none() : Option.some(Redacted.make(match[1]))
}

/** The challenge every 401 carries (RFC 6750). */
export const CHALLENGE_HEADERS: Readonly<Record<string, string>> = { "www-authenticate": "Bearer realm=\"petstore\"" }

const challenge = addResponseHeaders(CHALLENGE_HEADERS)

/**
 * The bearer check itself, given the request's `Authorization` header: the same code whichever path serves the
 * request (the HttpApi app, or the pipeline derived from the same declaration).
 */
export class BearerCheck extends Effect.Service<BearerCheck>()("Auth/BearerCheck", {
  effect: Effect.map(ApiKeys, (keys) => {
    // Made once: `check` runs on every request.
    const known = Option.match({
      onNone: () => Effect.fail(unauthorized("The API key is not valid.")),
      onSome: Effect.succeed<AuthenticatedKey>
    })
    return {
      check: (header: string | null | undefined): Effect.Effect<AuthenticatedKey, Unauthorized | Unavailable> => {
        if (header === undefined || header === null) return Effect.fail(unauthorized())
        const token = bearerToken(header)
        if (Option.isNone(token)) {
          return Effect.fail(unauthorized("The Authorization header must be 'Bearer <API_KEY>'."))
        }
        return Effect.flatMap(orUnavailable(keys.authenticate(token.value)), known)
      }
    }
  })
}) {}

/**
 * The `Authorization` middleware: the key, then its quota. The quota is counted here rather than in a middleware of its
 * own because HttpApi runs a group's later middleware before the earlier ones, without what they provide (the key).
 */
export const AuthorizationLive = Layer.effect(
  Authorization,
  Effect.gen(function*() {
    const { check } = yield* BearerCheck
    const rateLimits = yield* RateLimits
    // HttpApi hands over the header minus its first 7 characters; the header itself is read to check the scheme. The
    // effect is made once: each request runs it, rather than building it anew.
    // The request's log lines, its `request` line included, name the key that authenticated it (never the key); then
    // the key's quota, when there is one (without, no step is spent on it).
    const admit = Option.isNone(rateLimits.policy)
      ? (key: AuthenticatedKey) => Effect.as(annotateRequest("keyId", key.id), key)
      : (key: AuthenticatedKey) =>
        Effect.as(Effect.zipRight(annotateRequest("keyId", key.id), rateLimits.consume(key.id)), key)
    const authorize = Effect.flatMap(
      HttpServerRequest.HttpServerRequest,
      (request) => check(request.headers.authorization)
    ).pipe(
      Effect.tapError((error) => error._tag === "Unauthorized" ? challenge : Effect.void),
      Effect.flatMap(admit)
    )
    return Authorization.of({ bearerAuth: () => authorize })
  })
).pipe(Layer.provide(RateLimits.Default))
