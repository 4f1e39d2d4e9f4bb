/**
 * A route's program, what a request's fiber runs: the route's middleware around its handler, then the answer made from
 * the outcome (`Answer.ts`) with the headers the request's effects added, in a scope of the request's own. Built once
 * per route; what varies by request is read from the fiber's context (`RequestInput`).
 */
import { HttpApp, HttpBody, type HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Context, Effect, Exit, HashSet, Option, Runtime, RuntimeFlags, Scope, Stream } from "effect"
import { CurrentResponseHeaders } from "../ResponseHeaders.js"
import { type Answer, answerFromExit, refusalAnswer, type Served } from "./Answer.js"
import type { EndpointRoute } from "./Derive.js"
import type { DecodedRequest } from "./Handlers.js"
import * as Refusals from "./Refusals.js"

/** What a request's fiber reads of it besides its services. */
export class RequestInput extends Context.Tag("Serving/RequestInput")<RequestInput, {
  readonly request: HttpServerRequest.HttpServerRequest
  /** The request as its log lines name it (`Logging.RequestLogContext`). */
  readonly log: { readonly requestId: string; readonly annotations: Record<string, unknown> }
  /** The request as the endpoint's decoders made it, or why they refused it (answered once the middleware passed). */
  readonly decoded: DecodedRequest | Refusals.Refused
}>() {}

/** What a request's fiber reads of its own state: its input, and the answer headers its effects added. */
type RequestFiber = Parameters<Parameters<typeof Effect.withFiberRuntime>[0]>[0]

/** The request's own scope, which its program sets in its context. */
const requestScope = (fiber: { readonly currentContext: Context.Context<never> }) =>
  Context.unsafeGet(fiber.currentContext, Scope.Scope) as Scope.CloseableScope

/**
 * The answer with the headers the request's effects added (`ResponseHeaders.ts`), once any pre-response handler of the
 * platform's has seen it: read from the request's fiber in one step.
 */
const finishAnswer = (
  fiber: RequestFiber,
  { log: { annotations }, request }: RequestInput["Type"],
  made: Answer | HttpServerResponse.HttpServerResponse
): Effect.Effect<Served> => {
  const added = fiber.getFiberRef(CurrentResponseHeaders)
  const handler = fiber.getFiberRef(HttpApp.currentPreResponseHandlers)
  const run = (response: HttpServerResponse.HttpServerResponse) =>
    Option.isNone(handler) ? Effect.succeed(response) : Effect.orDie(handler.value(request, response))
  if (HttpServerResponse.isServerResponse(made)) {
    return Effect.flatMap(run(HttpServerResponse.setHeaders(made, added)), (response) => {
      const { body } = response
      if (body._tag !== "Stream") return Effect.succeed({ response: HttpServerResponse.toWeb(response), annotations })
      // A streamed body keeps the request's scope open until it ends, and runs as the request did: its logger, log
      // annotations and span.
      const scope = requestScope(fiber)
      streamingScopes.add(scope)
      const streamed = HttpServerResponse.setBody(
        response,
        HttpBody.stream(
          Stream.ensuring(body.stream, Scope.close(scope, Exit.void)),
          body.contentType,
          body.contentLength
        )
      )
      // Its fiber can be interrupted (its client cancelling the body), as the request's handler could.
      return Effect.map(Effect.runtime<never>(), ({ context, fiberRefs, runtimeFlags }) => ({
        response: HttpServerResponse.toWeb(streamed, {
          runtime: Runtime.make({
            context,
            fiberRefs,
            runtimeFlags: RuntimeFlags.enable(runtimeFlags, RuntimeFlags.Interruption)
          })
        }),
        annotations
      }))
    })
  }
  Object.assign(made.headers, added)
  if (Option.isNone(handler)) return Effect.succeed(made)
  // A pre-response handler sees the answer as a response, whose status and headers it may change.
  return Effect.map(run(HttpServerResponse.empty({ status: made.status, headers: made.headers })), (finished) => ({
    ...made,
    status: finished.status,
    headers: { ...finished.headers }
  }))
}

/** The request scopes a streamed body closes when it ends, rather than the request's answer. */
const streamingScopes = new WeakSet<Scope.Scope>()

/**
 * A route's program: its middleware around its handler, then the answer made from the outcome, in a scope of the
 * request's own, as the library's server gives each request. What a handler or middleware acquires, adds as a finalizer
 * or forks in it is released or interrupted once the answer is made, a streamed body's when the stream ends, and when
 * the request is interrupted from outside (its deadline, its client gone, the server's scope closing). The scope is set
 * in the request's context in place (the context is the request's own, as `Middleware.ts` provides).
 */
export const makeProgram = (route: EndpointRoute): Effect.Effect<Served> => {
  // A handler's requirements are what its middleware provide (checked where the handlers are typed).
  const handler = Effect.withFiberRuntime((fiber): Effect.Effect<unknown, unknown, unknown> => {
    const { decoded } = Context.unsafeGet(fiber.currentContext, RequestInput)
    return decoded instanceof Refusals.Refused ? Effect.fail(decoded) : route.handler(decoded)
  })
  // The fiber starts uninterruptible (`Pipeline.ts`): only the middleware and the handler can be interrupted, so that
  // the answer is made and the scope closed whatever interrupts them.
  const served = Effect.interruptible(
    route.middleware.reduceRight((inner, around) => around(inner), handler) as Effect.Effect<unknown>
  )
  /** The answer made from the outcome, then the request's scope closed with it (a streamed body's: when it ends). */
  const answered = (exit: Exit.Exit<unknown, unknown>) =>
    Effect.withFiberRuntime((fiber): Effect.Effect<Served> => {
      const input = Context.unsafeGet(fiber.currentContext, RequestInput)
      const scope = requestScope(fiber)
      const made = answerFromExit(route, exit, input.log.annotations)
      const finished = !Cause.isCause(made) ? finishAnswer(fiber, input, made) : Effect.zipRight(
        Refusals.logUnexpected(made),
        // A request that interrupted itself is a 503, as the library's server answers it; anything else a 500.
        Effect.suspend(() =>
          finishAnswer(
            fiber,
            input,
            refusalAnswer(
              Cause.isInterruptedOnly(made) ? Refusals.interrupted : Refusals.internalError,
              input.log.annotations
            )
          )
        )
      )
      // Closed however the answer ends, but for a streamed body's. A pre-response handler that dies is a bug: a 500.
      return Effect.matchCauseEffect(finished, {
        onSuccess: (answer) =>
          streamingScopes.has(scope) ? Effect.succeed(answer) : Effect.as(Scope.close(scope, exit), answer),
        onFailure: (cause) =>
          Effect.zipRight(
            Refusals.logUnexpected(cause),
            Effect.as(Scope.close(scope, exit), refusalAnswer(Refusals.internalError, input.log.annotations))
          )
      })
    })
  const outcome = Effect.matchCauseEffect(served, {
    onSuccess: (value) => answered(Exit.succeed(value)),
    // Interrupted from outside, the request is answered for what interrupted it (`makePipeline`).
    onFailure: (cause) =>
      Effect.descriptorWith(({ interruptors }) =>
        HashSet.size(interruptors) === 0
          ? answered(Exit.failCause(cause))
          : Effect.withFiberRuntime<never>((fiber) =>
            Effect.zipRight(Scope.close(requestScope(fiber), Exit.failCause(cause)), Effect.failCause(cause))
          )
      )
  })
  return Effect.withFiberRuntime((fiber) =>
    Effect.flatMap(Scope.make(), (scope) => {
      ;(fiber.currentContext.unsafeMap as Map<string, unknown>).set(Scope.Scope.key, scope)
      return outcome
    })
  )
}
