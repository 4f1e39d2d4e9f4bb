/**
 * A request decoded by its endpoint's own schemas, in HttpApi's order: path, payload, headers, query. Decoding is pure
 * and runs before the request's fiber starts; its outcome is what the handler receives once the middleware passed, so
 * an unauthenticated request is still a 401 whatever its query, as HttpApi answers it.
 */
import type { HttpServerRequest } from "@effect/platform"
import { Either, ParseResult } from "effect"
import type { EndpointRoute } from "./Derive.js"
import type { DecodedRequest } from "./Handlers.js"
import * as Refusals from "./Refusals.js"
import { type PipelineRequest, Refused } from "./RequestInput.js"

/** The path parameters percent-decoded, or undefined when one cannot be. */
const percentDecoded = (params: Readonly<Record<string, string>>): Record<string, string> | undefined => {
  const out: Record<string, string> = {}
  try {
    for (const name in params) out[name] = params[name].includes("%") ? decodeURIComponent(params[name]) : params[name]
  } catch {
    return undefined
  }
  return out
}

/** The request as `route`'s decoders make it, or the refusal of the first part they cannot read. */
export const decodeRequest = (
  route: EndpointRoute,
  input: PipelineRequest,
  request: HttpServerRequest.HttpServerRequest
): DecodedRequest | Refused => {
  const decoded: DecodedRequest = { request }
  const refuse = (part: Refusals.DecodedPart, error: ParseResult.ParseError) => {
    const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
    return new Refused(Refusals.decodeFailure(part, issue, (name) => Array.isArray(input.query[name])))
  }
  if (route.decodePath !== undefined) {
    const params = percentDecoded(input.params)
    if (params === undefined) return new Refused(Refusals.unreadablePath(input.request.url.split("?")[0]))
    const result = route.decodePath(params)
    if (Either.isLeft(result)) return refuse("path", result.left)
    decoded.path = result.right
  }
  if (route.decodePayload !== undefined) {
    const result = route.decodePayload(input.body?.json)
    if (Either.isLeft(result)) return refuse("body", result.left)
    decoded.payload = result.right
  }
  if (route.decodeHeaders !== undefined) {
    const result = route.decodeHeaders(input.request.headers)
    if (Either.isLeft(result)) return refuse("header", result.left)
    decoded.headers = result.right
  }
  if (route.decodeQuery !== undefined) {
    const result = route.decodeQuery(input.query)
    if (Either.isLeft(result)) return refuse("query", result.left)
    decoded.urlParams = result.right
  }
  return decoded
}
