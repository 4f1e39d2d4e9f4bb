/**
 * Headers a handler or a middleware adds to the answer it is part of (`Location`, `Link`, a 401's challenge, the
 * deprecation and rate-limit headers), whatever the outcome: the platform's pre-response handlers, so they mean what
 * they mean on any `HttpApi` server. Like any fiber-local state, what a fiber that loses a race or is never joined
 * added is not part of the answer.
 */
import { HttpApp, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"

/** Adds these headers to the answer of the current request. */
export const addResponseHeaders = (headers: Readonly<Record<string, string>>): Effect.Effect<void> =>
  HttpApp.appendPreResponseHandler((_request, response) =>
    Effect.succeed(HttpServerResponse.setHeaders(response, headers))
  )
