/**
 * Headers a handler or a middleware adds to the answer it is part of (`Location`, `Link`, a 401's challenge, the
 * deprecation and rate-limit headers), whatever the outcome. They are fiber-local, as the platform's pre-response
 * handlers are: a fiber starts with its parent's, a joined fiber's are added to its parent's, and what a fiber that
 * loses a race or is never joined added is not part of the answer. The engine applies them to every answer it makes;
 * an `HttpApiBuilder` server applies them with `withResponseHeaders`.
 */
import { HttpApp, HttpServerResponse } from "@effect/platform"
import { Effect, FiberRef } from "effect"

/** The headers the current request's effects added so far. */
export const CurrentResponseHeaders = FiberRef.unsafeMake<Readonly<Record<string, string>>>({}, {
  join: (parent, child) => child === parent ? parent : { ...parent, ...child }
})

/** Adds these headers to the answer of the current request. */
export const addResponseHeaders = (headers: Readonly<Record<string, string>>): Effect.Effect<void> =>
  FiberRef.update(CurrentResponseHeaders, (added) => ({ ...added, ...headers }))

/** An `HttpApp` whose answers carry the headers its effects added (the engine applies them itself). */
export const withResponseHeaders = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.zipRight(
    HttpApp.appendPreResponseHandler((_request, response) =>
      Effect.map(FiberRef.get(CurrentResponseHeaders), (added) => HttpServerResponse.setHeaders(response, added))
    ),
    app
  )
