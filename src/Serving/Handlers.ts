/**
 * A handler as the engine calls it: the function a group's registration gave `handle` (`Registration.ts`), which
 * `handle` checked against its endpoint's declaration. The engine calls it only with the request that the decoders
 * derived from that endpoint make (`Derive.ts`).
 */
import type { HttpServerRequest } from "@effect/platform"
import type { Effect } from "effect"

/** A request as the pipeline decodes it for a handler: the parts the endpoint declares, and the request itself. */
export interface DecodedRequest {
  path?: unknown
  urlParams?: unknown
  payload?: unknown
  headers?: unknown
  request: HttpServerRequest.HttpServerRequest
}

export type AnyHandler = (request: DecodedRequest) => Effect.Effect<unknown, unknown, unknown>
