/**
 * The bearer check behind `Authorization`: the scheme is matched case-insensitively, the key looked up by the id it
 * carries and compared by hash in constant time. A refusal is a 401 with `WWW-Authenticate: Bearer`. A key that passed
 * then counts one request against its quota (`RateLimits`: 429 past it).
 */
import { Effect, Exit, Layer, Option, Redacted } from "effect"
import type { AuthenticatedKey } from "../Domain/ApiKey.js"
import { type Unauthorized, unauthorized, type Unavailable } from "../Domain/Errors.js"
import { flatMapNow, matchNow } from "../Immediate.js"
import { RateLimits } from "../RateLimit/RateLimits.js"
import { layerDirect } from "../Serving/Middleware.js"
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

/**
 * The bearer check itself, given the request's `Authorization` header: done at once (an `Exit`, see `Immediate.ts`)
 * for a missing or malformed header and for a key checked a moment ago; else the database is asked.
 */
export class BearerCheck extends Effect.Service<BearerCheck>()("Auth/BearerCheck", {
  effect: Effect.map(ApiKeys, (keys) => {
    // Made once: `check` runs on every request.
    const known = Option.match({
      onNone: () => Exit.fail(unauthorized("The API key is not valid.")),
      onSome: Exit.succeed<AuthenticatedKey>
    })
    return {
      check: (header: string | null | undefined): Effect.Effect<AuthenticatedKey, Unauthorized | Unavailable> => {
        if (header === undefined || header === null) return Exit.fail(unauthorized())
        const token = bearerToken(header)
        if (Option.isNone(token)) {
          return Exit.fail(unauthorized("The Authorization header must be 'Bearer <API_KEY>'."))
        }
        return flatMapNow(orUnavailable(keys.authenticate(token.value)), known)
      }
    }
  })
}) {}

/**
 * The `Authorization` middleware: the key, then its quota. The quota is counted here rather than in a middleware of its
 * own because HttpApi runs a group's later middleware before the earlier ones, without what they provide (the key).
 * Written as a direct face (`Serving/Middleware.ts`): a key checked a moment ago, and its quota when it is counted in
 * memory, are settled before the request's fiber starts.
 */
export const AuthorizationLive = layerDirect(
  Authorization,
  Effect.gen(function*() {
    const { check } = yield* BearerCheck
    const { consume, policy } = yield* RateLimits
    return (request) =>
      matchNow(check(request.headers.get("authorization")), {
        onFailure: (error) => {
          if (error._tag === "Unauthorized") Object.assign(request.answerHeaders, CHALLENGE_HEADERS)
          return Exit.fail(error)
        },
        onSuccess: (key) => {
          // The request's log lines, its `request` line included, name the key that authenticated it (never the key);
          // then the key's quota, when there is one (without, nothing is spent on it).
          request.annotations.keyId = key.id
          return Option.isNone(policy)
            ? Exit.succeed(key)
            : flatMapNow(consume(key.id, request.answerHeaders), () => Exit.succeed(key))
        }
      })
  })
).pipe(Layer.provide(RateLimits.Default))
