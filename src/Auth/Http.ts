/**
 * The `Authorization` middleware: the bearer key, then its quota. The scheme word is matched case-insensitively, the
 * key checked by `ApiKeys`; a refusal is a 401 with `WWW-Authenticate: Bearer`. A key that passed then counts one
 * request against its quota (`RateLimits`: 429 past it), here rather than in a middleware of its own because HttpApi
 * runs a group's later middleware before the earlier ones, without what they provide (the key).
 */
import { HttpServerRequest } from "@effect/platform"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import type { AuthenticatedKey } from "../Domain/ApiKey.js"
import { type RateLimited, type Unauthorized, unauthorized, type Unavailable } from "../Domain/Errors.js"
import { annotateRequest, annotateRequestIn } from "../Operations/Logging.js"
import { RateLimits } from "../RateLimit/RateLimits.js"
import { addResponseHeaders } from "../ResponseHeaders.js"
import { orUnavailableError } from "../Unavailable.js"
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

/** The 401 of a key that is not (or no longer) valid. */
export const refuseInvalidKey = refuse("The API key is not valid.")

export const AuthorizationLive = Layer.effect(
  Authorization,
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    const rateLimits = yield* RateLimits
    /** A key that passed: the request's log lines name it (outside a request, the fiber's); its quota is counted. */
    const passed = (context: Context.Context<never>, key: AuthenticatedKey): Checked => {
      const counted = rateLimits.consume(key.id, key)
      return annotateRequestIn(context, "keyId", key.id)
        ? counted
        : Effect.zipRight(annotateRequest("keyId", key.id), counted)
    }
    /**
     * The key an `Authorization` header stands for, then its quota. `credential` is HttpApi's bearer credential, the
     * header past its first seven characters: the key itself when the header is spelled `Bearer <key>`.
     */
    const check = (
      context: Context.Context<never>,
      header: string | undefined,
      credential: Redacted.Redacted<string>
    ): Checked => {
      if (header === undefined) return refuse()
      const token = BEARER.exec(header)?.[1]
      if (token === undefined) return refuse("The Authorization header must be 'Bearer <API_KEY>'.")
      const key = token === Redacted.value(credential) ? credential : Redacted.make(token)
      return Effect.matchEffect(keys.authenticate(key), {
        onFailure: orUnavailableError,
        onSuccess: (found) => Option.isNone(found) ? refuseInvalidKey : passed(context, found.value)
      })
    }
    return {
      // The header as sent, where a request is served: HttpApi's bearer credential drops the scheme word unread.
      bearerAuth: (credential) =>
        Effect.contextWithEffect((context: Context.Context<never>) => {
          const request = Context.getOption(context, HttpServerRequest.HttpServerRequest)
          return check(
            context,
            Option.isSome(request) ? request.value.headers.authorization : `Bearer ${Redacted.value(credential)}`,
            credential
          )
        })
    }
  })
).pipe(Layer.provide(RateLimits.Default))
