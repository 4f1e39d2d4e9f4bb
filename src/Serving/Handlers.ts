/**
 * The handlers the engine serves, by group and endpoint name: the same functions the API's `HttpApiBuilder.group`
 * layers hand to `handle`, which checks each against its endpoint's declaration. The engine calls a handler only with
 * the request that the decoders derived from that endpoint make (`Derive.ts`).
 */
import type { HttpServerRequest } from "@effect/platform"
import { Context, type Effect } from "effect"

/** A request as the pipeline decodes it for a handler: the parts the endpoint declares, and the request itself. */
export interface DecodedRequest {
  path?: unknown
  urlParams?: unknown
  payload?: unknown
  headers?: unknown
  request: HttpServerRequest.HttpServerRequest
}

export type AnyHandler = (request: DecodedRequest) => Effect.Effect<unknown, unknown, unknown>

export class ApiHandlers extends Context.Tag("Serving/ApiHandlers")<
  ApiHandlers,
  Readonly<Record<string, Readonly<Record<string, AnyHandler>>>>
>() {}
