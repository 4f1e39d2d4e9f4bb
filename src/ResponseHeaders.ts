/**
 * Headers a handler or a middleware adds to the answer it is part of (`Location`, `Link`, a 401's challenge, the
 * deprecation headers, rate-limit headers), whatever its outcome (a failure's answer included).
 *
 * Where the request pipeline serves the request, its fiber's context holds the answer's headers (`AnswerHeaders`) and
 * they are added there; elsewhere (the HttpApi app) they ride on the framework's pre-response handlers. Either way the
 * answer carries them.
 */
import { HttpApp, HttpServerResponse } from "@effect/platform"
import { Context, Effect, Exit, Option } from "effect"
import { dual } from "effect/Function"
import { contextWithEffectNow, flatMapNow, matchNow } from "./Immediate.js"

/** The headers of the answer being made for the current request, as the pipeline collects them. */
export class AnswerHeaders
  extends Context.Tag("ResponseHeaders/AnswerHeaders")<AnswerHeaders, Record<string, string>>()
{}

const addTo = (headers: Readonly<Record<string, string>>) => (context: Context.Context<never>): Effect.Effect<void> => {
  const collected = Context.getOption(context, AnswerHeaders)
  if (Option.isNone(collected)) {
    return HttpApp.appendPreResponseHandler((_request, response) =>
      Effect.succeed(HttpServerResponse.setHeaders(response, headers))
    )
  }
  Object.assign(collected.value, headers)
  return Effect.void
}

/**
 * Adds these headers to the answer of the current request. One step of the fiber where the pipeline serves the request
 * (it runs on every request: a middleware's headers, a handler's `Location`).
 */
export const addResponseHeaders = (headers: Readonly<Record<string, string>>): Effect.Effect<void> =>
  Effect.contextWithEffect(addTo(headers))

/**
 * Adds the headers `f` gives for the success of `self` (none for `undefined`), as `Effect.tap` with
 * `addResponseHeaders` would; in a call at once (`Immediate.ts`) with `self` done, at once — after its success, as
 * ever, so the request is still answered without a fiber.
 */
export const tapResponseHeaders: {
  <A>(
    f: (a: A) => Readonly<Record<string, string>> | undefined
  ): <E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(
    self: Effect.Effect<A, E, R>,
    f: (a: A) => Readonly<Record<string, string>> | undefined
  ): Effect.Effect<A, E, R>
} = dual(2, <A, E, R>(
  self: Effect.Effect<A, E, R>,
  f: (a: A) => Readonly<Record<string, string>> | undefined
): Effect.Effect<A, E, R> =>
  flatMapNow(self, (a) => {
    const headers = f(a)
    if (headers === undefined) return Exit.succeed(a)
    return contextWithEffectNow((context) => addThen(context, headers, Exit.succeed(a)))
  }))

/** The headers added, then `exit`. */
const addThen = <A, E>(
  context: Context.Context<never>,
  headers: Readonly<Record<string, string>>,
  exit: Exit.Exit<A, E>
): Effect.Effect<A, E> => flatMapNow(addTo(headers)(context), () => exit)

/**
 * `tapResponseHeaders` for either outcome: the headers `onSuccess` gives for a success, `onFailure`'s for a failure
 * (none for `undefined`), in the one step of the fiber that `Effect.matchEffect` takes (a `tapError` beside a
 * `tapResponseHeaders` would take three); at once in a call at once with `self` done. A defect is left as it is.
 */
export const tapAnswerHeaders = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  options: {
    readonly onSuccess: (a: A) => Readonly<Record<string, string>> | undefined
    readonly onFailure: (e: E) => Readonly<Record<string, string>> | undefined
  }
): Effect.Effect<A, E, R> =>
  contextWithEffectNow((context) =>
    matchNow(self, {
      onSuccess: (a) => {
        const headers = options.onSuccess(a)
        return headers === undefined ? Exit.succeed(a) : addThen(context, headers, Exit.succeed(a))
      },
      onFailure: (e) => {
        const headers = options.onFailure(e)
        return headers === undefined ? Exit.fail(e) : addThen(context, headers, Exit.fail(e))
      }
    })
  )
