/**
 * Effects that may already be done. In Effect 3 an `Exit` is an effect, and `Effect.succeed` makes one. Code on the
 * request path that often knows its outcome at once (a key checked a moment ago) returns an `Exit` then, and these
 * combinators keep it one: the request pipeline settles an `Exit` without spending a step of a fiber on it
 * (`Serving/Middleware.ts`), while anything still to be run is composed as usual.
 */
import { Cause, Effect, Exit, Option } from "effect"

const asExit = <A, E, R>(self: Effect.Effect<A, E, R>): Exit.Exit<A, E> | undefined =>
  Exit.isExit(self) ? self as Exit.Exit<A, E> : undefined

/** `Effect.flatMap`, applied at once when `self` is already done. */
export const flatMapNow = <A, E, R, B, E2, R2>(
  self: Effect.Effect<A, E, R>,
  f: (a: A) => Effect.Effect<B, E2, R2>
): Effect.Effect<B, E | E2, R | R2> => {
  const exit = asExit(self)
  if (exit === undefined) return Effect.flatMap(self, f)
  return Exit.isSuccess(exit) ? f(exit.value) : exit as Exit.Exit<never, E>
}

/** `Effect.matchEffect`, applied at once when `self` is already done. */
export const matchNow = <A, E, R, B, E2, R2, C, E3, R3>(
  self: Effect.Effect<A, E, R>,
  options: {
    readonly onFailure: (e: E) => Effect.Effect<B, E2, R2>
    readonly onSuccess: (a: A) => Effect.Effect<C, E3, R3>
  }
): Effect.Effect<B | C, E2 | E3, R | R2 | R3> => {
  const exit = asExit(self)
  if (exit === undefined) return Effect.matchEffect(self, options)
  if (Exit.isSuccess(exit)) return options.onSuccess(exit.value)
  const failure = Cause.failureOption(exit.cause)
  // A defect or an interruption is not a failure to handle: it stays what it is, as `Effect.matchEffect` leaves it.
  return Option.isSome(failure) ? options.onFailure(failure.value) : Exit.failCause(exit.cause as Cause.Cause<never>)
}
