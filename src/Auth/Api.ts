/**
 * The API-key security of every catalogue operation: `Authorization: Bearer <API_KEY>`.
 */
import { HttpApiMiddleware, HttpApiSecurity, OpenApi } from "@effect/platform"
import { Context, Schema } from "effect"
import type { AuthenticatedKey } from "../Domain/ApiKey.js"
import { RateLimitedResponse, UnauthorizedResponse, UnavailableResponse } from "../Domain/Errors.js"

type HeaderDocs = Record<string, { readonly description: string; readonly schema: { readonly type: string } }>

/**
 * The headers the `Authorization` middleware gives the answers of the operations it guards, for the OpenAPI document:
 * with `RATE_LIMIT` set, every answer to an authenticated request states the quota (draft-ietf-httpapi-ratelimit-headers-10).
 */
export const RATE_LIMIT_HEADER_DOCS: HeaderDocs = {
  "RateLimit-Policy": {
    description: "With `RATE_LIMIT` set: the API key's quota, `\"default\";q=<requests>;w=<window in seconds>` " +
      "(draft-ietf-httpapi-ratelimit-headers-10).",
    schema: { type: "string" }
  },
  RateLimit: {
    description: "With `RATE_LIMIT` set: what is left of the quota, `\"default\";r=<requests left>;t=<seconds until " +
      "all of the quota is back>`.",
    schema: { type: "string" }
  }
}

/** `Retry-After` on 429 and 503 answers. */
export const RETRY_AFTER_HEADER_DOCS: HeaderDocs = {
  "Retry-After": { description: "RFC 9110: seconds to wait before retrying.", schema: { type: "integer" } }
}

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
