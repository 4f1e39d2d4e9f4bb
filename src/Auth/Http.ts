/**
 * The bearer check behind `Authorization`: the scheme is matched case-insensitively, the key looked up by the id it
 * carries and compared by hash in constant time. A refusal is a 401 with `WWW-Authenticate: Bearer`.
 */
import { HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, FiberRef, Layer, Option, Redacted } from "effect"
import { orUnavailable, unauthorized } from "../Domain/Errors.js"
import { currentKeyId } from "../Middleware.js"
import { Authorization } from "./Api.js"
import { ApiKeys } from "./ApiKeys.js"

const BEARER = /^bearer +([^\s]+) *$/i

/** The token of an `Authorization: Bearer <token>` header, if the header is one. */
export const bearerToken = (header: string | undefined): Option.Option<Redacted.Redacted<string>> => {
  const match = header === undefined ? null : BEARER.exec(header)
  return match === null ? Option.none() : Option.some(Redacted.make(match[1]))
}

const challenge = HttpApp.appendPreResponseHandler((_request, response) =>
  Effect.succeed(HttpServerResponse.setHeader(response, "www-authenticate", "Bearer realm=\"petstore\""))
)

const refuse = (message?: string) => Effect.zipRight(challenge, Effect.fail(unauthorized(message)))

export const AuthorizationLive = Layer.effect(
  Authorization,
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    return Authorization.of({
      // HttpApi hands over the header minus its first 7 characters; the header itself is read to check the scheme.
      bearerAuth: () =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const header = request.headers.authorization
          if (header === undefined) return yield* refuse()
          const token = bearerToken(header)
          if (Option.isNone(token)) return yield* refuse("The Authorization header must be 'Bearer <API_KEY>'.")
          const key = yield* orUnavailable(keys.authenticate(token.value))
          if (Option.isNone(key)) return yield* refuse("The API key is not valid.")
          yield* FiberRef.set(currentKeyId, key.value.id)
          return key.value
        })
    })
  })
)
