/**
 * Headers a handler or a middleware adds to the answer it is part of (`Location`, `Link`, a 401's challenge, the
 * deprecation headers, rate-limit headers), whatever its outcome (a failure's answer included).
 *
 * Where the request pipeline serves the request, its fiber's context holds the answer's headers (`AnswerHeaders`) and
 * they are added there; elsewhere (the HttpApi app) they ride on the framework's pre-response handlers. Either way the
 * answer carries them.
 */
import { HttpApp, HttpServerResponse } from "@effect/platform"
import { Cause, Context, Effect, Exit, Option } from "effect"
import { dual } from "effect/Function"
import { contextWithEffectNow, flatMapExitNow, flatMapNow } from "./Immediate.js"

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
 * Adds the headers `onSuccess` gives for the success of `self`, and `onFailure`'s for its failure (none for
 * `undefined`), in the one step of the fiber that `Effect.matchCauseEffect` takes (a `tapError` beside a `tap` would
 * take three); in a call at once (`Immediate.ts`) with `self` done, at once, so the request is still answered without
 * a fiber. The outcome is `self`'s, its whole cause included: a defect or an interruption gets no headers.
 */
export const tapAnswerHeaders = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  options: {
    readonly onSuccess: (a: A) => Readonly<Record<string, string>> | undefined
    readonly onFailure?: ((e: E) => Readonly<Record<string, string>> | undefined) | undefined
  }
): Effect.Effect<A, E, R> =>
  flatMapExitNow(self, (exit) =>
    withHeaders(
      exit,
      Exit.isSuccess(exit) ? options.onSuccess(exit.value) : failureHeaders(exit.cause, options.onFailure)
    ))

/** `exit`, once `headers` (none for `undefined`) are added to the answer. */
const withHeaders = <A, E>(exit: Exit.Exit<A, E>, headers: Readonly<Record<string, string>> | undefined) =>
  headers === undefined
    ? exit
    : contextWithEffectNow((context) => flatMapNow(addTo(headers)(context), () => exit))

/** What a handler answers with: an outcome known at once, and the headers its answer carries (none: `undefined`). */
export type Answer<A, E> = readonly [outcome: Exit.Exit<A, E>, headers: Readonly<Record<string, string>> | undefined]

/**
 * The answer `f` makes of the outcome of `self` — another outcome, with its headers — in the same one step as
 * `tapAnswerHeaders` (in a call at once with `self` done, at once): for a handler whose answer is decided from what
 * `self` found, which `Effect.flatMap`, `tapAnswerHeaders` and `Effect.map` would take three steps to say.
 */
export const answerWith = <A, E, R, B, E2>(
  self: Effect.Effect<A, E, R>,
  f: (exit: Exit.Exit<A, E>) => Answer<B, E2>
): Effect.Effect<B, E2, R> =>
  flatMapExitNow(self, (exit) => {
    const [outcome, headers] = f(exit)
    return withHeaders(outcome, headers)
  })

const failureHeaders = <E>(
  cause: Cause.Cause<E>,
  onFailure: ((e: E) => Readonly<Record<string, string>> | undefined) | undefined
): Readonly<Record<string, string>> | undefined => {
  if (onFailure === undefined) return undefined
  const failure = Cause.failureOption(cause)
  return Option.isSome(failure) ? onFailure(failure.value) : undefined
}

/** `tapAnswerHeaders` for a success alone: as `Effect.tap` with `addResponseHeaders` would. */
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
): Effect.Effect<A, E, R> => tapAnswerHeaders(self, { onSuccess: f }))
