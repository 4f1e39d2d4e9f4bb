/**
 * The API-key security of every catalogue operation: `Authorization: Bearer <API_KEY>`, then the key's quota.
 */
import { HttpApiMiddleware, HttpApiSecurity, OpenApi } from "@effect/platform"
import { Context, Schema } from "effect"
import type { AuthenticatedKey } from "../Domain/ApiKey.js"
import { RateLimitedResponse, UnauthorizedResponse, UnavailableResponse } from "../Domain/Errors.js"

/** The key the current request authenticated with. */
export class CurrentApiKey extends Context.Tag("Auth/CurrentApiKey")<CurrentApiKey, AuthenticatedKey>() {}

export class Authorization extends HttpApiMiddleware.Tag<Authorization>()("Auth/Authorization", {
  // 429: the key is valid but has used up its quota (`RATE_LIMIT`); checked right after the key.
  failure: Schema.Union(UnauthorizedResponse, RateLimitedResponse, UnavailableResponse),
  provides: CurrentApiKey,
  security: {
    bearerAuth: HttpApiSecurity.bearer.pipe(
      HttpApiSecurity.annotate(
        OpenApi.Description,
        "An API key issued with `petstore keys create`, sent as `Authorization: Bearer <API_KEY>`."
      )
    )
  }
}) {}
