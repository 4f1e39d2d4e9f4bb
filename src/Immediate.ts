/**
 * Effects that may already be done. In Effect 3 an `Exit` is an effect, and `Effect.succeed` makes one. Code on the
 * request path that often knows its outcome at once (a key checked a moment ago) returns an `Exit` then, and these
 * combinators keep it one: the request pipeline settles an `Exit` without spending a step of a fiber on it
 * (`Serving/Middleware.ts`), while anything still to be run is composed as usual.
 *
 * A **call at once** goes one step further. The pipeline calls a handler outside any fiber (`callAtOnce`), with the
 * request's context; while it runs, work that can be finished on the spot is done when its effect is made, and that
 * effect is its `Exit`: a statement on SQLite's synchronous driver (`tryNow`), the headers that follow a success
 * (`ResponseHeaders.tapResponseHeaders`, through `contextWithEffectNow`). A handler made of such steps returns an
 * `Exit`, and the request is answered without a fiber. Anywhere else (in a fiber: the HttpApi app, a test, the command line) the same code makes ordinary effects,
 * run when they are run. So, in a handler, make only the effects that are run: a statement made and then dropped
 * (`Effect.when(statement, …)`) has already run in a call at once.
 */
import { Cause, Context, Effect, Exit, Option } from "effect"
import { dual } from "effect/Function"

const asExit = <A, E, R>(self: Effect.Effect<A, E, R>): Exit.Exit<A, E> | undefined =>
  Exit.isExit(self) ? self as Exit.Exit<A, E> : undefined

/** `Effect.flatMap`, applied at once when `self` is already done. */
export const flatMapNow: {
  <A, B, E2, R2>(f: (a: A) => Effect.Effect<B, E2, R2>): <E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<
    B,
    E | E2,
    R | R2
  >
  <A, E, R, B, E2, R2>(self: Effect.Effect<A, E, R>, f: (a: A) => Effect.Effect<B, E2, R2>): Effect.Effect<
    B,
    E | E2,
    R | R2
  >
} = dual(2, <A, E, R, B, E2, R2>(
  self: Effect.Effect<A, E, R>,
  f: (a: A) => Effect.Effect<B, E2, R2>
): Effect.Effect<B, E | E2, R | R2> => {
  const exit = asExit(self)
  if (exit === undefined) return Effect.flatMap(self, f)
  return Exit.isSuccess(exit) ? f(exit.value) : exit as Exit.Exit<never, E>
})

/** `Effect.map`, applied at once when `self` is already done. */
export const mapNow: {
  <A, B>(f: (a: A) => B): <E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<B, E, R>
  <A, E, R, B>(self: Effect.Effect<A, E, R>, f: (a: A) => B): Effect.Effect<B, E, R>
} = dual(2, <A, E, R, B>(self: Effect.Effect<A, E, R>, f: (a: A) => B): Effect.Effect<B, E, R> => {
  const exit = asExit(self)
  if (exit === undefined) return Effect.map(self, f)
  return Exit.isSuccess(exit) ? Exit.succeed(f(exit.value)) : exit as Exit.Exit<never, E>
})

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

/**
 * `f` applied to the outcome of `self`, its whole cause included — `Effect.exit` then `Effect.flatMap`, in the one step
 * of `Effect.matchCauseEffect` — and applied at once when `self` is already done.
 */
export const flatMapExitNow = <A, E, R, B, E2, R2>(
  self: Effect.Effect<A, E, R>,
  f: (exit: Exit.Exit<A, E>) => Effect.Effect<B, E2, R2>
): Effect.Effect<B, E2, R | R2> => {
  const exit = asExit(self)
  if (exit !== undefined) return f(exit)
  return Effect.matchCauseEffect(self, {
    onSuccess: (a) => f(Exit.succeed(a)),
    onFailure: (cause) => f(Exit.failCause(cause))
  })
}

/** The context of the call at once running now, if one is. */
let atOnce: Context.Context<never> | undefined

/**
 * Calls `f` as a call at once in `context` (the request's): what it returns is an `Exit` if everything it made could
 * be done on the spot, else the effect left to run, in a fiber with that context. A defect thrown is its `Exit`.
 */
export const callAtOnce = <A, E, R>(
  context: Context.Context<never>,
  f: () => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => {
  const previous = atOnce
  atOnce = context
  try {
    return f()
  } catch (defect) {
    return Exit.die(defect)
  } finally {
    atOnce = previous
  }
}

/** `Effect.try`: in a call at once, run now (its `Exit`). */
export const tryNow = <A, E>(options: { readonly try: () => A; readonly catch: (error: unknown) => E }) => {
  if (atOnce === undefined) return Effect.try(options)
  try {
    return Exit.succeed(options.try())
  } catch (error) {
    return Exit.fail(options.catch(error))
  }
}

/** `Effect.contextWithEffect`: in a call at once, applied now to the request's context. */
export const contextWithEffectNow = <A, E, R>(
  f: (context: Context.Context<never>) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => atOnce === undefined ? Effect.contextWithEffect(f) : f(atOnce)

/** A service of the request's context, as its tag would give it: in a call at once, found now (its `Exit`). */
export const serviceNow = <I, S>(tag: Context.Tag<I, S>): Effect.Effect<S, never, I> =>
  atOnce === undefined ? tag : Exit.succeed(Context.unsafeGet(atOnce as Context.Context<I>, tag))
