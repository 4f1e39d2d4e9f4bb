/**
 * Running one request to a declared endpoint: middleware → handler → encode, the request decoded before (as
 * `RequestDecode.ts` says why). Each middleware's direct face, when it has one, is asked first, before any fiber
 * (`Middleware.ts`): those that know their outcome at once are settled there — what they provide put in the request's
 * context, a failure answered. When all of them were, the handler is called at once (`Immediate.callAtOnce`): a
 * handler that knows its outcome on the spot (a read on SQLite) is answered without a fiber. The rest of the request
 * runs in a fiber of its own, the answer made from its exit (`Answer.ts`). The fiber starts with a context of the
 * request's own: the request, the headers its answer collects, the annotations its log lines carry (its request id for
 * every fiber it starts: the runtime's loggers read it there, `Logging.withRequestAnnotations`). The programs are
 * built once per route from what `Derive.ts` derived; a request only supplies its input.
 *
 * As in HttpApi, the middleware run before the decoded request is looked at (an unauthenticated request is a 401
 * whatever its query), and a failure is encoded as the endpoint declares it; a failure it does not declare is a
 * logged 500, an interrupted request a 503.
 */
import { HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Context, Duration, Effect, Exit, type Fiber, FiberId, type FiberRefs, Runtime, Tracer } from "effect"
import { callAtOnce } from "../Immediate.js"
import { RequestLogContext } from "../Logging.js"
import { AnswerHeaders } from "../ResponseHeaders.js"
import { type Answer, answerFromExit, refusalAnswer } from "./Answer.js"
import type { EndpointRoute } from "./Derive.js"
import type { MiddlewareRequest } from "./Middleware.js"
import * as Refusals from "./Refusals.js"
import { decodeRequest } from "./RequestDecode.js"
import { type PipelineRequest, Refused, RequestInput } from "./RequestInput.js"
import { RequestServices } from "./RequestServices.js"

type Services = RequestInput | HttpServerRequest.HttpServerRequest | HttpServerRequest.ParsedSearchParams

/**
 * A route's programs: `programs[i]` is its middleware from the i-th on around its handler (`programs[0]` the whole
 * request, the last the handler alone), so that the request goes on from wherever the direct faces left it.
 */
const makePrograms = (route: EndpointRoute): ReadonlyArray<Effect.Effect<unknown, unknown>> => {
  // A handler's requirements are what its middleware provide (checked where the handlers are typed, `Handlers.ts`).
  const core = Effect.contextWithEffect((context: Context.Context<RequestInput>) => {
    const decoded = Context.unsafeGet(context, RequestInput).decoded
    return decoded instanceof Refused ? Effect.fail(decoded) : route.handler(decoded)
  }) as Effect.Effect<unknown, unknown, Services>
  const programs: Array<Effect.Effect<unknown, unknown, Services>> = [core]
  for (const middleware of [...route.middleware].reverse()) programs.unshift(middleware.around(programs[0]))
  // Each program's services are in the context its fiber starts with (`makePipeline`).
  return programs as Array<Effect.Effect<unknown, unknown>>
}

export type Pipeline = (route: EndpointRoute, input: PipelineRequest) => Answer | Promise<Answer>

/**
 * The pipeline over the routes, on the given runtime (its logger, its services). Each request runs in a fiber whose
 * context holds the request and whose log annotations start with its request id, so every line logged while serving
 * it, from any fiber it starts, carries that id. A client that goes away interrupts the fiber.
 */
export const makePipeline = (
  runtime: Runtime.Runtime<never>,
  routes: ReadonlyArray<EndpointRoute>,
  /** How long a request may take (`REQUEST_TIMEOUT`): past it, it is interrupted and answered 503. */
  requestTimeout: Duration.Duration
): Pipeline => {
  const programsOf = new Map(routes.map((route) => [route, makePrograms(route)]))
  const baseServices = (runtime.context as unknown as { readonly unsafeMap: Map<string, unknown> }).unsafeMap
  const timeoutMillis = Duration.toMillis(requestTimeout)
  /** A runtime with the request's context and references, for what runs after its outcome (a log line, …). */
  const afterwards = (fiberRefs: FiberRefs.FiberRefs, context: Context.Context<never>) =>
    Runtime.make({ context, fiberRefs, runtimeFlags: runtime.runtimeFlags })

  return (route, input) => {
    const request = HttpServerRequest.fromWeb(input.request)
    const services = new RequestServices(baseServices)
    const answerHeaders: Record<string, string> = {}
    const log = { requestId: input.requestId, annotations: {} }
    const decoded = decodeRequest(route, input, request)
    const requestInput: RequestInput = {
      started: input.started,
      params: input.params,
      query: input.query,
      body: input.body,
      requestId: input.requestId,
      parentSpan: input.parentSpan,
      services,
      request,
      answerHeaders,
      log,
      decoded
    }
    services.set(RequestInput.key, requestInput)
    services.set(HttpServerRequest.HttpServerRequest.key, request)
    services.set(HttpServerRequest.ParsedSearchParams.key, input.query)
    services.set(AnswerHeaders.key, answerHeaders)
    services.set(RequestLogContext.key, log)
    if (input.parentSpan !== undefined) services.set(Tracer.ParentSpan.key, input.parentSpan)
    const context = Context.unsafeMake<never>(services)

    /**
     * The answer, with the headers handlers and middleware added, then — when a fiber ran — what any pre-response
     * handler of the framework's makes of it (so middleware written for HttpApi work unchanged; run, when there is one,
     * with the fiber's context and references).
     */
    const finish = (
      exit: Exit.Exit<unknown, unknown>,
      fiber?: Fiber.RuntimeFiber<unknown, unknown>,
      late = false
    ): Answer | Promise<Answer> => {
      let answer = late
        ? refusalAnswer(Refusals.deadlineExceeded, log.annotations)
        : answerFromExit(route, exit, requestInput)
      if (answer === undefined) {
        if (Exit.isFailure(exit)) {
          const fiberRefs = fiber === undefined ? runtime.fiberRefs : fiber.getFiberRefs()
          Runtime.runFork(afterwards(fiberRefs, context))(Effect.logError("unexpected failure", exit.cause))
        }
        answer = refusalAnswer(Refusals.internalError, log.annotations)
      }
      if (answer.headers !== answerHeaders) Object.assign(answer.headers, answerHeaders)
      const handler = fiber?.getFiberRef(HttpApp.currentPreResponseHandlers)
      if (handler === undefined || handler._tag === "None") return answer
      const made = answer
      const response = HttpServerResponse.empty({ status: made.status, headers: made.headers })
      return Runtime.runPromise(afterwards(fiber!.getFiberRefs(), context))(
        Effect.map(Effect.orDie(handler.value(request, response)), (finished) => ({
          ...made,
          status: finished.status,
          headers: { ...finished.headers }
        }))
      )
    }

    // The middleware's direct faces, in order, until one has none or does not know its outcome at once.
    const programs = programsOf.get(route)!
    const middleware = route.middleware
    let program = programs[middleware.length]
    const seen: MiddlewareRequest = { headers: input.request.headers, answerHeaders, annotations: log.annotations }
    for (let i = 0; i < middleware.length; i++) {
      const direct = middleware[i].direct
      if (direct === undefined) {
        program = programs[i]
        break
      }
      const outcome = direct(seen)
      if (!Exit.isExit(outcome)) {
        program = middleware[i].around(programs[i + 1], outcome) as Effect.Effect<unknown, unknown>
        break
      }
      if (Exit.isSuccess(outcome)) {
        const provides = middleware[i].provides
        if (provides !== undefined) services.set(provides, outcome.value)
      } else if (!middleware[i].optional) {
        return finish(outcome)
      }
    }
    if (program === programs[middleware.length]) {
      // Past every middleware with a request its decoders refused: answered without a fiber.
      if (decoded instanceof Refused) return finish(Exit.fail(decoded))
      // The handler, called at once: answered without a fiber if it knew its outcome on the spot.
      program = callAtOnce(context, () => route.handler(decoded) as Effect.Effect<unknown, unknown>)
      if (Exit.isExit(program)) return finish(program)
    }

    const fiber = Runtime.runFork(
      Runtime.make({ context, fiberRefs: runtime.fiberRefs, runtimeFlags: runtime.runtimeFlags })
    )(program)
    const done = fiber.unsafePoll()
    if (done !== null) return finish(done, fiber)
    // Only a request that waits needs its deadline kept, and its client's going away noticed.
    const signal = input.request.signal
    const abort = () => fiber.unsafeInterruptAsFork(FiberId.none)
    let late = false
    const deadline = setTimeout(() => {
      late = true
      abort()
    }, timeoutMillis - (performance.now() - input.started))
    signal.addEventListener("abort", abort, { once: true })
    return new Promise((resolve) =>
      fiber.addObserver((exit) => {
        clearTimeout(deadline)
        signal.removeEventListener("abort", abort)
        resolve(finish(exit, fiber, late))
      })
    )
  }
}
