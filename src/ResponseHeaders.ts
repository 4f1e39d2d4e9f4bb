/**
 * Headers a handler or a middleware adds to the answer it is part of (`Location`, `Link`, a 401's challenge, the
 * deprecation headers, rate-limit headers). They ride on the framework's pre-response handlers, so they reach the answer
 * whichever way the request is served, whatever its outcome (a failure's answer included).
 */
import { HttpApp, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"

/** Adds these headers to the answer of the current request. */
export const addResponseHeaders = (headers: Readonly<Record<string, string>>): Effect.Effect<void> =>
  HttpApp.appendPreResponseHandler((_request, response) => Effect.succeed(HttpServerResponse.setHeaders(response, headers)))
