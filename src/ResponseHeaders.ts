/**
 * Headers a handler or a middleware adds to the answer it is part of (`Location`, `Link`, a 401's challenge, the
 * deprecation and rate-limit headers), whatever the outcome.
 *
 * Where the request is served by the engine, its context holds a record of the answer's headers (`CollectedHeaders`)
 * and they are added there; elsewhere (the HttpApi app) they ride on the platform's pre-response handlers. The record
 * pays: a pre-response handler is a `FiberRef` update and an `HttpServerResponse` remade per header set, about a third
 * of a read's CPU time in `npm run bench:stages`.
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
