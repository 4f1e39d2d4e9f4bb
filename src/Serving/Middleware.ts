/**
 * An `HttpApiMiddleware` implementation as the request pipeline runs it: the same implementation the HttpApi app runs
 * (taken from the context the app is built with), applied the way `HttpApiBuilder` applies it — security schemes tried
 * in turn with the credential the framework itself decodes, `optional` middleware passing on failure, and what a
 * middleware `provides` added to the context of everything it wraps.
 *
 * A middleware made with `layerDirect` also has a direct face: a function of the request that returns its outcome,
 * already done (an `Exit`) when it knows it at once, else the effect that finds out. The HttpApi app runs that face as
 * the middleware's effect; the pipeline calls it before the request's fiber starts, so a middleware that knows its
 * outcome at once costs no step of a fiber (`Pipeline.ts`).
 */
import { HttpApiBuilder, HttpApiMiddleware, type HttpApiSecurity, HttpServerRequest } from "@effect/platform"
import { Context, Effect, Layer } from "effect"
import { annotateRequest } from "../Logging.js"
import { addResponseHeaders } from "../ResponseHeaders.js"
import type { HeaderView } from "./Gate.js"
import { RequestInput } from "./RequestInput.js"

type Requirements = HttpServerRequest.HttpServerRequest | HttpServerRequest.ParsedSearchParams | RequestInput

/**
 * What a middleware's direct face sees of the request, and where it puts what it adds to the answer and to the
 * request's log line (written to until its outcome is done).
 */
export interface MiddlewareRequest {
  /** The request's headers, read by name (the web request's own, where the pipeline serves it: nothing is copied). */
  readonly headers: HeaderView
  readonly answerHeaders: Record<string, string>
  readonly annotations: Record<string, unknown>
}

/** A middleware's direct face: its outcome, an `Exit` when it is known at once (see `Immediate.ts`). */
export type DirectFace<A, E> = (request: MiddlewareRequest) => Effect.Effect<A, E>

/** The outcome of a middleware implementation: what it provides and how it fails. */
type OutcomeOf<Service> = Service extends Effect.Effect<infer A, infer E, infer _R> ? DirectFace<A, E>
  : Service extends Record<string, (_: never) => Effect.Effect<infer A, infer E, infer _R>> ? DirectFace<A, E>
  : never

const directFaces = new WeakMap<object, DirectFace<unknown, unknown>>()

/** The direct face as the HttpApi app runs it: what it adds to the answer and the log applied once it is done. */
const asEffect = <A, E>(face: DirectFace<A, E>) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const headers: HeaderView = { get: (name) => request.headers[name.toLowerCase()] ?? null }
    const seen: MiddlewareRequest = { headers, answerHeaders: {}, annotations: {} }
    return Effect.onExit(face(seen), () =>
      Effect.zipRight(
        addResponseHeaders(seen.answerHeaders),
        Effect.forEach(Object.entries(seen.annotations), ([name, value]) => annotateRequest(name, value), {
          discard: true
        })
      ))
  })

/**
 * The implementation of a middleware given by its direct face. A security middleware's face reads the credentials it
 * needs from the request itself: every scheme it declares runs the same face.
 */
export const layerDirect = <Self, Service, E, R>(
  tag: Context.Tag<Self, Service>,
  make: Effect.Effect<OutcomeOf<Service>, E, R>
): Layer.Layer<Self, E, R> =>
  Layer.effect(
    tag,
    Effect.map(make, (face) => {
      const effect = asEffect(face as DirectFace<unknown, unknown>)
      const middleware = tag as unknown as HttpApiMiddleware.TagClassAny
      const implementation: object = HttpApiMiddleware.isSecurity(middleware)
        ? Object.fromEntries(Object.keys(middleware.security).map((scheme) => [scheme, () => effect]))
        : effect
      directFaces.set(implementation, face as DirectFace<unknown, unknown>)
      return implementation as Service
    })
  )

export interface Middleware {
  readonly key: string
  /** The key of the service it provides, if any. */
  readonly provides: string | undefined
  /** Whether a failure of it lets the request go on (without what it would have provided). */
  readonly optional: boolean
  /** Its direct face, if it has one (`layerDirect`). */
  readonly direct: DirectFace<unknown, unknown> | undefined
  /**
   * `inner`, run after this middleware (and with what it provides, if anything); `outcome` in place of the
   * middleware's own effect, when its direct face has already been asked.
   */
  readonly around: <A, E, R>(
    inner: Effect.Effect<A, E, R>,
    outcome?: Effect.Effect<unknown, unknown>
  ) => Effect.Effect<A, unknown, R | Requirements>
}

/**
 * What a middleware provides is added to the request's context for the rest of the request, in place: that context
 * is the request's own (made for it by the pipeline), so nothing needs copying or restoring afterwards.
 */
const provideForRest = <A, E, R>(key: string, value: unknown, inner: Effect.Effect<A, E, R>) =>
  Effect.contextWithEffect((context: Context.Context<RequestInput>) => {
    Context.unsafeGet(context, RequestInput).services.set(key, value)
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
  const provides = tag.provides?.key
  const around = <A, E, R>(
    inner: Effect.Effect<A, E, R>,
    outcome: Effect.Effect<unknown, unknown, Requirements> = run
  ): Effect.Effect<A, unknown, R | Requirements> => {
    if (tag.optional) {
      return Effect.matchEffect(outcome, {
        onFailure: () => inner,
        onSuccess: (value) => provides === undefined ? inner : provideForRest(provides, value, inner)
      })
    }
    return provides === undefined
      ? Effect.zipRight(outcome, inner)
      : Effect.flatMap(outcome, (value) => provideForRest(provides, value, inner))
  }
  return {
    key: tag.key,
    provides,
    optional: tag.optional,
    direct: typeof implementation === "object" && implementation !== null ? directFaces.get(implementation) : undefined,
    around
  }
}
