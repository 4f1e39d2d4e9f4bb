/**
 * Running one request to a declared endpoint: middleware → decode → handler → encode, in a fiber of the request's
 * own, the answer made inside that fiber. The fiber starts with a context of the request's own: the request, the
 * headers its answer collects, the annotations its log lines carry (its request id for every fiber it starts: the
 * runtime's loggers read it there, `Logging.withRequestAnnotations`). The stages are built once per route from what
 * `Derive.ts` derived; a request only supplies its input.
 *
 * As in HttpApi, the middleware run before the request is decoded (an unauthenticated request is a 401 whatever its
 * query), and a failure is encoded as the endpoint declares it; a failure it does not declare is a logged 500, an
 * interrupted request a 503.
 */
import { HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import {
  Cause,
  Context,
  Duration,
  Effect,
  Either,
  Exit,
  type Fiber,
  FiberId,
  Option,
  ParseResult,
  Runtime,
  Tracer
} from "effect"
import { RequestLogContext } from "../Logging.js"
import { AnswerHeaders } from "../ResponseHeaders.js"
import type { EndpointRoute } from "./Derive.js"
import type { ReadBody } from "./Gate.js"
import type { DecodedRequest } from "./Handlers.js"
import * as Refusals from "./Refusals.js"
import { Refused, RequestInput } from "./RequestInput.js"
import { RequestServices } from "./RequestServices.js"

/** An answer before it is a `Response`: the server adds its own headers and writes the log line from it. */
export interface Answer {
  readonly status: number
  readonly body: string | null
  readonly headers: Record<string, string>
  /** The annotations set while serving the request (the key id its middleware set, …), for its log line. */
  readonly annotations: Readonly<Record<string, unknown>>
}

const JSON_HEADERS = { "content-type": "application/json" } as const

const NONE: Readonly<Record<string, unknown>> = {}

export const refusalAnswer = (refusal: Refusals.Refusal, annotations = NONE): Answer => ({
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

/**
 * The endpoint's decoders over the request's input, in HttpApi's order: path, payload, headers, query. Run before the
 * request's fiber starts (decoding is pure), its outcome is what the handler receives once the middleware passed: so
 * an unauthenticated request is still a 401 whatever its query, as HttpApi answers it.
 */
const decodeRequest = (
  route: EndpointRoute,
  input: PipelineRequest,
  request: HttpServerRequest.HttpServerRequest
): DecodedRequest | Refused => {
  const decoded: DecodedRequest = { request }
  const refuse = (part: Refusals.DecodedPart, error: ParseResult.ParseError) =>
    new Refused(Refusals.decodeFailure(part, firstIssue(error), (name) => Array.isArray(input.query[name])))
  if (route.decodePath !== undefined) {
    const params = percentDecoded(input.params)
    if (params === undefined) return new Refused(Refusals.unreadablePath(input.request.url.split("?")[0]))
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
    const result = route.decodeHeaders(request.headers)
    if (Either.isLeft(result)) return refuse("header", result.left)
    decoded.headers = result.right
  }
  if (route.decodeQuery !== undefined) {
    const result = route.decodeQuery(input.query)
    if (Either.isLeft(result)) return refuse("query", result.left)
    decoded.urlParams = result.right
  }
  return decoded
}

/** The headers handlers and middleware added (`addResponseHeaders`) over the JSON content type. */
const withJsonType = (added: Record<string, string>): Record<string, string> => {
  if (!("content-type" in added)) added["content-type"] = JSON_HEADERS["content-type"]
  return added
}

/**
 * The answer a finished request's fiber gives, made from its exit: its success as the endpoint encodes it, a refusal,
 * a declared error as the endpoint encodes it, a 503 for an interrupted request, else `undefined` (a failure nobody
 * declared, logged by the caller as a 500).
 */
const answerFromExit = (
  route: EndpointRoute,
  exit: Exit.Exit<unknown, unknown>,
  input: RequestInput
): Answer | undefined => {
  const annotations = input.log.annotations
  if (Exit.isSuccess(exit)) {
    const value = exit.value
    // A handler that answers with a response of its own: kept as it is but for its body, which is not JSON.
    if (HttpServerResponse.isServerResponse(value)) {
      return { status: value.status, body: null, headers: { ...value.headers, ...input.answerHeaders }, annotations }
    }
    return {
      status: route.successStatus,
      body: route.encodeSuccess(value),
      headers: withJsonType(input.answerHeaders),
      annotations
    }
  }
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure)) {
    const error = failure.value
    if (error instanceof Refused) return refusalAnswer(error.refusal, annotations)
    for (const declared of route.failures) {
      if (!declared.is(error)) continue
      return {
        status: declared.status,
        body: JSON.stringify(declared.encode(error)),
        headers: withJsonType(input.answerHeaders),
        annotations
      }
    }
  }
  if (Cause.isInterruptedOnly(exit.cause)) return refusalAnswer(Refusals.shuttingDown, annotations)
  return undefined
}

type Services = RequestInput | HttpServerRequest.HttpServerRequest | HttpServerRequest.ParsedSearchParams

/** A route's program: its middleware around its handler, which receives the request decoded before the fiber began. */
const makeProgram = (route: EndpointRoute): Effect.Effect<unknown, unknown, Services> => {
  // A handler's requirements are what its middleware provide (checked where the handlers are typed, `Handlers.ts`).
  const core = Effect.contextWithEffect((context: Context.Context<RequestInput>) => {
    const decoded = Context.unsafeGet(context, RequestInput).decoded
    return decoded instanceof Refused ? Effect.fail(decoded) : route.handler(decoded)
  }) as Effect.Effect<unknown, unknown, Services>
  return route.middleware.reduceRight<Effect.Effect<unknown, unknown, Services>>(
    (inner, middleware) => middleware.around(inner),
    core
  )
}

/** The input of a request to a route. */
export interface PipelineRequest {
  readonly request: Request
  /** When the server received it (`performance.now()`): the deadline counts from then. */
  readonly started: number
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
export const makePipeline = (
  runtime: Runtime.Runtime<never>,
  routes: ReadonlyArray<EndpointRoute>,
  /** How long a request may take (`REQUEST_TIMEOUT`): past it, it is interrupted and answered 503. */
  requestTimeout: Duration.Duration
): Pipeline => {
  // Each program's services are in the context its fiber starts with (below).
  const programs = new Map(routes.map((route) => [route, makeProgram(route) as Effect.Effect<unknown, unknown>]))
  const baseServices = (runtime.context as unknown as { readonly unsafeMap: Map<string, unknown> }).unsafeMap
  const timeoutMillis = Duration.toMillis(requestTimeout)
  /** A runtime with a finished request fiber's context and references, for what runs after it (a log line, …). */
  const afterwards = (fiber: Fiber.RuntimeFiber<unknown, unknown>, context: Context.Context<never>) =>
    Runtime.make({ context, fiberRefs: fiber.getFiberRefs(), runtimeFlags: runtime.runtimeFlags })

  return (route, input) => {
    const request = HttpServerRequest.fromWeb(input.request)
    const services = new RequestServices(baseServices)
    const answerHeaders: Record<string, string> = {}
    const log = { requestId: input.requestId, annotations: {} }
    const decoded = decodeRequest(route, input, request)
    const requestInput: RequestInput = { ...input, services, request, answerHeaders, log, decoded }
    services.set(RequestInput.key, requestInput)
    services.set(HttpServerRequest.HttpServerRequest.key, request)
    services.set(HttpServerRequest.ParsedSearchParams.key, input.query)
    services.set(AnswerHeaders.key, answerHeaders)
    services.set(RequestLogContext.key, log)
    if (input.parentSpan !== undefined) services.set(Tracer.ParentSpan.key, input.parentSpan)
    const context = Context.unsafeMake<never>(services)
    const fiber = Runtime.runFork(
      Runtime.make({ context, fiberRefs: runtime.fiberRefs, runtimeFlags: runtime.runtimeFlags })
    )(programs.get(route)!)

    /**
     * The answer, with the headers handlers and middleware added, then what any pre-response handler of the
     * framework's makes of it (so middleware written for HttpApi work unchanged; run, when there is one, with the
     * fiber's context and references).
     */
    const finish = (exit: Exit.Exit<unknown, unknown>, late = false): Answer | Promise<Answer> => {
      let answer = late
        ? refusalAnswer(Refusals.deadlineExceeded, log.annotations)
        : answerFromExit(route, exit, requestInput)
      if (answer === undefined) {
        if (Exit.isFailure(exit)) {
          Runtime.runFork(afterwards(fiber, context))(Effect.logError("unexpected failure", exit.cause))
        }
        answer = refusalAnswer(Refusals.internalError, log.annotations)
      }
      if (answer.headers !== answerHeaders) Object.assign(answer.headers, answerHeaders)
      const handler = fiber.getFiberRef(HttpApp.currentPreResponseHandlers)
      if (handler._tag === "None") return answer
      const made = answer
      const response = HttpServerResponse.empty({ status: made.status, headers: made.headers })
      return Runtime.runPromise(afterwards(fiber, context))(
        Effect.map(Effect.orDie(handler.value(request, response)), (finished) => ({
          ...made,
          status: finished.status,
          headers: { ...finished.headers }
        }))
      )
    }
    const done = fiber.unsafePoll()
    if (done !== null) return finish(done)
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
        resolve(finish(exit, late))
      })
    )
  }
}
