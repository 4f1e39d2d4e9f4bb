/**
 * Headers a handler or a middleware adds to the answer it is part of (`Location`, `Link`, a 401's challenge, the
 * deprecation and rate-limit headers), whatever the outcome. Where the engine serves the request, its context holds
 * the answer's headers (`CollectedHeaders`) and they are added there, without a pre-response handler per header set;
 * elsewhere (the HttpApi app) they ride on the platform's pre-response handlers.
 */
import { HttpApp, HttpServerResponse } from "@effect/platform"
import { Context, Effect, Option } from "effect"

/** The headers of the answer being made for the current request, where the engine collects them. */
export class CollectedHeaders
  extends Context.Tag("ResponseHeaders/CollectedHeaders")<CollectedHeaders, Record<string, string>>()
{}

/** Adds these headers to the answer of the current request. */
export const addResponseHeaders = (headers: Readonly<Record<string, string>>): Effect.Effect<void> =>
  Effect.contextWithEffect((context: Context.Context<never>) => {
    const collected = Context.getOption(context, CollectedHeaders)
    if (Option.isSome(collected)) {
      Object.assign(collected.value, headers)
      return Effect.void
    }
    return HttpApp.appendPreResponseHandler((_request, response) =>
      Effect.succeed(HttpServerResponse.setHeaders(response, headers))
    )
  })
