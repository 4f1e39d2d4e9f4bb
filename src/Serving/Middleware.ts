/**
 * An `HttpApiMiddleware` implementation as the request pipeline runs it: the same implementation the HttpApi app runs
 * (taken from the context the app is built with), applied the way `HttpApiBuilder` applies it — security schemes tried
 * in turn with the credential the framework itself decodes, `optional` middleware passing on failure, and what a
 * middleware `provides` added to the context of everything it wraps.
 */
import { HttpApiBuilder, HttpApiMiddleware, type HttpApiSecurity, type HttpServerRequest } from "@effect/platform"
import { Context, Effect } from "effect"
import type { RequestInput } from "./RequestInput.js"

type Requirements = HttpServerRequest.HttpServerRequest | HttpServerRequest.ParsedSearchParams | RequestInput

export interface Middleware {
  readonly key: string
  /** Whether a failure of it lets the request go on (without what it would have provided). */
  readonly optional: boolean
  /** `inner`, run after this middleware (and with what it provides, if anything). */
  readonly around: <A, E, R>(inner: Effect.Effect<A, E, R>) => Effect.Effect<A, unknown, R | Requirements>
}

/**
 * What a middleware provides, added to the request's context for the rest of the request, in place: the context is the
 * request's own (the pipeline makes it), and `Effect.provideServiceEffect`'s copy of it and `FiberRef` round trip cost
 * a quarter of the pipeline's CPU time in `npm run bench:stages`.
 */
const provideForRest = <A, E, R>(tag: Context.Tag<unknown, unknown>, value: unknown, inner: Effect.Effect<A, E, R>) =>
  Effect.contextWithEffect((context: Context.Context<never>) => {
    ;(context.unsafeMap as Map<string, unknown>).set(tag.key, value)
    return inner
  })

/** The effect of a security middleware: each scheme's credential to its handler, the next scheme if it fails. */
const securityEffect = (
  security: Record<string, HttpApiSecurity.HttpApiSecurity>,
  implementation: Record<string, (credential: unknown) => Effect.Effect<unknown, unknown>>
): Effect.Effect<unknown, unknown, Requirements> => {
  let effect: Effect.Effect<unknown, unknown, Requirements> | undefined
  for (const [scheme, declared] of Object.entries(security)) {
    const attempt = Effect.flatMap(HttpApiBuilder.securityDecode(declared), implementation[scheme])
    effect = effect === undefined ? attempt : Effect.catchAll(effect, () => attempt)
  }
  return effect ?? Effect.void
}

export const makeMiddleware = (tag: HttpApiMiddleware.TagClassAny, implementation: unknown): Middleware => {
  const run: Effect.Effect<unknown, unknown, Requirements> = HttpApiMiddleware.isSecurity(tag)
    ? securityEffect(tag.security, implementation as Record<string, (credential: unknown) => Effect.Effect<unknown>>)
    : implementation as Effect.Effect<unknown, unknown, Requirements>
  const provides = tag.provides as Context.Tag<unknown, unknown> | undefined
  const around = <A, E, R>(inner: Effect.Effect<A, E, R>): Effect.Effect<A, unknown, R | Requirements> => {
    if (tag.optional) {
      return Effect.matchEffect(run, {
        onFailure: () => inner,
        onSuccess: (value) => provides === undefined ? inner : provideForRest(provides, value, inner)
      })
    }
    return provides === undefined
      ? Effect.zipRight(run, inner)
      : Effect.flatMap(run, (value) => provideForRest(provides, value, inner))
  }
  return { key: tag.key, optional: tag.optional, around }
}
