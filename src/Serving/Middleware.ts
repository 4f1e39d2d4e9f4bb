/**
 * An `HttpApiMiddleware` implementation as the request pipeline runs it: the same implementation the HttpApi app runs
 * (taken from the context the app is built with), applied the way `HttpApiBuilder` applies it — security schemes tried
 * in turn with the credential the framework itself decodes, `optional` middleware passing on failure, and what a
 * middleware `provides` added to the context of everything it wraps.
 */
import { HttpApiBuilder, HttpApiMiddleware, type HttpServerRequest } from "@effect/platform"
import { type Context, Effect } from "effect"

type Requirements = HttpServerRequest.HttpServerRequest | HttpServerRequest.ParsedSearchParams
type Run = Effect.Effect<unknown, unknown, Requirements>

/**
 * What a middleware provides, added to the request's context for the rest of the request, in place: the context is the
 * request's own (the pipeline makes it), which spares `Effect.provideServiceEffect`'s copy of it and `FiberRef` round
 * trip, a quarter of the pipeline's CPU time (`npm run bench:stages`).
 */
const provideForRest = <A, E, R>(tag: Context.Tag<unknown, unknown>, value: unknown, inner: Effect.Effect<A, E, R>) =>
  Effect.contextWithEffect((context: Context.Context<never>) => {
    ;(context.unsafeMap as Map<string, unknown>).set(tag.key, value)
    return inner
  })

/** The middleware as the pipeline runs it: a function of what it wraps. */
export const makeMiddleware = (tag: HttpApiMiddleware.TagClassAny, implementation: unknown) => {
  // A security middleware: each scheme's credential to its handler, the next scheme if it fails.
  const run = !HttpApiMiddleware.isSecurity(tag) ? implementation as Run : Object.entries(tag.security).reduce(
    (previous: Run | undefined, [scheme, security]) => {
      const handler = (implementation as Record<string, (credential: unknown) => Run>)[scheme]
      const attempt = Effect.flatMap(HttpApiBuilder.securityDecode(security), handler)
      return previous === undefined ? attempt : Effect.catchAll(previous, () => attempt)
    },
    undefined
  ) ?? Effect.void
  const provides = tag.provides as Context.Tag<unknown, unknown> | undefined
  const rest = <A, E, R>(inner: Effect.Effect<A, E, R>) => (value: unknown) =>
    provides === undefined ? inner : provideForRest(provides, value, inner)
  // `inner`, run after this middleware (and with what it provides, if anything); past an optional one's failure.
  return <A, E, R>(inner: Effect.Effect<A, E, R>): Effect.Effect<A, unknown, R | Requirements> =>
    tag.optional
      ? Effect.matchEffect(run, { onFailure: () => inner, onSuccess: rest(inner) })
      : provides === undefined
      ? Effect.zipRight(run, inner)
      : Effect.flatMap(run, rest(inner))
}
