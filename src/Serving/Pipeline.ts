/**
 * Running one request to a declared endpoint: decode → middleware → handler → encode, in a fiber of the request's
 * own, the answer made inside that fiber (so the headers that middleware and handlers add, and the log annotations
 * they set, are the fiber's). The stages are built once per route from what `Derive.ts` derived; a request only
 * supplies its input.
 *
 * As in HttpApi, the middleware run before the request is decoded (an unauthenticated request is a 401 whatever its
 * query), and a failure is encoded as the endpoint declares it; a failure it does not declare is a logged 500, an
 * interrupted request a 503.
 */
import { HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import {
  Cause,
  Context,
  Effect,
  Either,
  Exit,
  FiberId,
  FiberRef,
  FiberRefs,
  HashMap,
  HashSet,
  Logger,
  Option,
  ParseResult,
  Runtime,
  Tracer
} from "effect"
import type { EndpointRoute } from "./Derive.js"
import type { ReadBody } from "./Gate.js"
import type { DecodedRequest } from "./Handlers.js"
import { RequestInput } from "./RequestInput.js"
import * as Refusals from "./Refusals.js"

/** A request the pipeline refuses itself (a failed decode), carried through the fiber's error channel. */
class Refused {
  readonly _tag = "Refused"
  constructor(readonly refusal: Refusals.Refusal) {}
}

/** An answer before it is a `Response`: the server adds its own headers and writes the log line from it. */
export interface Answer {
  readonly status: number
  readonly body: string | null
  readonly headers: Record<string, string>
  /** The request fiber's log annotations at the end (its request id, the key id its middleware set, …). */
  readonly annotations: HashMap.HashMap<string, unknown>
}

const JSON_HEADERS = { "content-type": "application/json" } as const

export const refusalAnswer = (
  refusal: Refusals.Refusal,
  annotations: HashMap.HashMap<string, unknown> = HashMap.empty()
): Answer => ({
  status: refusal.status,
  body: Refusals.refusalBody(refusal),
  headers: refusal.headers === undefined ? { ...JSON_HEADERS } : { ...JSON_HEADERS, ...refusal.headers },
  annotations
})

const percentDecoded = (params: Readonly<Record<string, string>>): Record<string, string> | undefined => {
  const out: Record<string, string> = {}
  try {
    for (const name in params) out[name] = decodeURIComponent(params[name])
  } catch {
    return undefined
  }
  return out
}

const firstIssue = (error: ParseResult.ParseError) => ParseResult.ArrayFormatter.formatErrorSync(error)[0]

/** The endpoint's decoders over the request's input, in HttpApi's order: path, payload, headers, query. */
const decodeStage = (route: EndpointRoute) =>
  Effect.flatMap(RequestInput, (input): Effect.Effect<DecodedRequest, Refused> => {
    const decoded: DecodedRequest = { request: input.request }
    const refuse = (part: Refusals.DecodedPart, error: ParseResult.ParseError) =>
      Effect.fail(
        new Refused(Refusals.decodeFailure(part, firstIssue(error), (name) => Array.isArray(input.query[name])))
      )
    if (route.decodePath !== undefined) {
      const params = percentDecoded(input.params)
      if (params === undefined) return Effect.fail(new Refused(Refusals.unreadablePath(input.request.url.split("?")[0])))
      const result = route.decodePath(params)
      if (Either.isLeft(result)) return refuse("path", result.left)
      decoded.path = result.right
    }
    if (route.decodePayload !== undefined) {
      const result = route.decodePayload(input.body?.json)
      if (Either.isLeft(result)) return refuse("body", result.left)
      decoded.payload = result.right
    }
    if (route.decodeHeaders !== undefined) {
      const result = route.decodeHeaders(input.request.headers)
      if (Either.isLeft(result)) return refuse("header", result.left)
      decoded.headers = result.right
    }
    if (route.decodeQuery !== undefined) {
      const result = route.decodeQuery(input.query)
      if (Either.isLeft(result)) return refuse("query", result.left)
      decoded.urlParams = result.right
    }
    return Effect.succeed(decoded)
  })

/** The answer for a failure: a refusal, a declared error as the endpoint encodes it, or a logged 500. */
const failureAnswer = (route: EndpointRoute, cause: Cause.Cause<unknown>) => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const error = failure.value
    if (error instanceof Refused) return Effect.succeed(refusalAnswer(error.refusal))
    for (const declared of route.failures) {
      if (!declared.is(error)) continue
      return Effect.succeed<Answer>({
        status: declared.status,
        body: JSON.stringify(declared.encode(error)),
        headers: { ...JSON_HEADERS },
        annotations: HashMap.empty()
      })
    }
  }
  return Effect.as(Effect.logError("unexpected failure", cause), refusalAnswer(Refusals.internalError))
}

/**
 * The answer, finished in the request's fiber: the headers its pre-response handlers add (`addResponseHeaders`, the
 * framework's mechanism, so middleware written for HttpApi work unchanged) and its log annotations.
 */
const finish = (answer: Answer) =>
  Effect.withFiberRuntime<Answer>((fiber) => {
    const annotations = fiber.getFiberRef(FiberRef.currentLogAnnotations)
    const handler = fiber.getFiberRef(HttpApp.currentPreResponseHandlers)
    if (handler._tag === "None") return Effect.succeed({ ...answer, annotations })
    const request = Context.unsafeGet(fiber.currentContext, RequestInput).request
    const response = HttpServerResponse.empty({ status: answer.status, headers: answer.headers })
    return Effect.map(Effect.orDie(handler.value(request, response)), (finished) => ({
      ...answer,
      status: finished.status,
      headers: { ...finished.headers },
      annotations
    }))
  })

/** The whole pipeline of one route, built once: it never fails, its value is the answer. */
type Services = RequestInput | HttpServerRequest.HttpServerRequest | HttpServerRequest.ParsedSearchParams

const makeProgram = (route: EndpointRoute): Effect.Effect<Answer, never, Services> => {
  // A handler's requirements are what its middleware provide (checked where the handlers are typed, `Handlers.ts`).
  const core = Effect.flatMap(decodeStage(route), route.handler) as Effect.Effect<unknown, unknown, Services>
  const wrapped = route.middleware.reduceRight<Effect.Effect<unknown, unknown, Services>>(
    (inner, middleware) => middleware.around(inner),
    core
  )
  return Effect.matchCauseEffect(wrapped, {
    onSuccess: (value) =>
      finish(
        HttpServerResponse.isServerResponse(value)
          // A handler that answers with a response of its own: kept as it is but for its body, which is not JSON.
          ? { status: value.status, body: null, headers: { ...value.headers }, annotations: HashMap.empty() }
          : { status: route.successStatus, body: route.encodeSuccess(value), headers: { ...JSON_HEADERS }, annotations: HashMap.empty() }
      ),
    onFailure: (cause) => Effect.flatMap(failureAnswer(route, cause), finish)
  })
}

/** The input of a request to a route. */
export interface PipelineRequest {
  readonly request: Request
  readonly params: Readonly<Record<string, string>>
  readonly query: Readonly<Record<string, string | Array<string>>>
  readonly body: ReadBody | undefined
  readonly requestId: string
  /** The request's server span: its fiber runs under it (its child spans and log lines join it). */
  readonly parentSpan?: Tracer.Span | undefined
}

export type Pipeline = (route: EndpointRoute, input: PipelineRequest) => Answer | Promise<Answer>

/**
 * The pipeline over the routes, on the given runtime (its logger, its services). Each request runs in a fiber whose
 * context holds the request and whose log annotations start with its request id, so every line logged while serving
 * it, from any fiber it starts, carries that id. A client that goes away interrupts the fiber.
 */
export const makePipeline = (runtime: Runtime.Runtime<never>, routes: ReadonlyArray<EndpointRoute>): Pipeline => {
  // Each program's services are in the context its fiber starts with (below).
  const programs = new Map(routes.map((route) => [route, makeProgram(route) as Effect.Effect<Answer>]))
  const base = withRequestIds(runtime)
  const baseServices = (runtime.context as unknown as { readonly unsafeMap: Map<string, unknown> }).unsafeMap

  return (route, input) => {
    const request = HttpServerRequest.fromWeb(input.request)
    const services = new Map(baseServices)
    services.set(RequestInput.key, { ...input, services, request })
    services.set(HttpServerRequest.HttpServerRequest.key, request)
    services.set(HttpServerRequest.ParsedSearchParams.key, input.query)
    if (input.parentSpan !== undefined) services.set(Tracer.ParentSpan.key, input.parentSpan)
    const fiber = Runtime.runFork(
      Runtime.make({ context: Context.unsafeMake<never>(services), fiberRefs: base.fiberRefs, runtimeFlags: base.runtimeFlags })
    )(programs.get(route)!)
    const answerOf = (exit: Exit.Exit<Answer>) =>
      Exit.isSuccess(exit) ? exit.value : refusalAnswer(Refusals.shuttingDown)
    const done = fiber.unsafePoll()
    if (done !== null) return answerOf(done)
    const signal = input.request.signal
    const abort = () => fiber.unsafeInterruptAsFork(FiberId.none)
    signal.addEventListener("abort", abort, { once: true })
    return new Promise((resolve) =>
      fiber.addObserver((exit) => {
        signal.removeEventListener("abort", abort)
        resolve(answerOf(exit))
      })
    )
  }
}

/**
 * The runtime with every logger naming the request a line is logged for: the request id is read from the logging
 * fiber's context (a request's fiber, or any fiber it started, which inherit its context), so no fiber carries an
 * annotation of its own for it (setting one copies the fiber's references on every request).
 */
const withRequestIds = (runtime: Runtime.Runtime<never>) =>
  Runtime.updateFiberRefs(runtime, (refs) =>
    FiberRefs.updateAs(refs, {
      fiberId: FiberId.none,
      fiberRef: FiberRef.currentLoggers,
      value: HashSet.map(FiberRefs.getOrDefault(refs, FiberRef.currentLoggers), (logger) =>
        Logger.mapInputOptions(logger, (options) => {
          const input = Context.getOption(FiberRefs.getOrDefault(options.context, FiberRef.currentContext), RequestInput)
          return input._tag === "None"
            ? options
            : { ...options, annotations: HashMap.set(options.annotations, "requestId", input.value.requestId) }
        }))
    }))
