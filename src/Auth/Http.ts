/**
 * The `Authorization` middleware: the bearer key, then its quota. The scheme word is matched case-insensitively, the
 * key checked by `ApiKeys`; a refusal is a 401 with `WWW-Authenticate: Bearer`. A key that passed then counts one
 * request against its quota (`RateLimits`: 429 past it), here rather than in a middleware of its own because HttpApi
 * runs a group's later middleware before the earlier ones, without what they provide (the key).
 */
import { HttpServerRequest } from "@effect/platform"
import { Effect, Layer, Option, Redacted } from "effect"
import type { AuthenticatedKey } from "../Domain/ApiKey.js"
import { type RateLimited, type Unauthorized, unauthorized, type Unavailable } from "../Domain/Errors.js"
import { annotateRequest } from "../Operations/Logging.js"
import { RateLimits } from "../RateLimit/RateLimits.js"
import { addResponseHeaders } from "../ResponseHeaders.js"
import { orUnavailable } from "../Unavailable.js"
import { Authorization } from "./Api.js"
import { ApiKeys } from "./ApiKeys.js"

const BEARER = /^bearer +([^\s]+) *$/i

type Checked = Effect.Effect<AuthenticatedKey, Unauthorized | RateLimited | Unavailable>

/** A 401, with the challenge every 401 carries (RFC 6750). */
const refuse = (message?: string) =>
  Effect.zipRight(
    addResponseHeaders({ "www-authenticate": "Bearer realm=\"petstore\"" }),
    Effect.fail(unauthorized(message))
  )

export const AuthorizationLive = Layer.effect(
  Authorization,
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    const rateLimits = yield* RateLimits
    /** The key an `Authorization` header stands for, then its quota; the request's log lines name the key's id. */
    const check = (header: string | undefined): Checked => {
      if (header === undefined) return refuse()
      const token = BEARER.exec(header)?.[1]
      if (token === undefined) return refuse("The Authorization header must be 'Bearer <API_KEY>'.")
      return Effect.flatMap(orUnavailable(keys.authenticate(Redacted.make(token))), (key): Checked =>
        Option.isNone(key)
          ? refuse("The API key is not valid.")
          : Effect.as(
            Effect.zipRight(annotateRequest("keyId", key.value.id), rateLimits.consume(key.value.id)),
            key.value
          ))
    }
    return {
      // The header as sent, where a request is served: HttpApi's bearer credential drops the scheme word unread.
      bearerAuth: (token) =>
        Effect.flatMap(
          Effect.serviceOption(HttpServerRequest.HttpServerRequest),
          (request) =>
            check(Option.isSome(request) ? request.value.headers.authorization : `Bearer ${Redacted.value(token)}`)
        )
    }
  })
).pipe(Layer.provide(RateLimits.Default))
