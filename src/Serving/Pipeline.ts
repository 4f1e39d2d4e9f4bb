/**
 * Running one request to a declared endpoint: middleware → handler → answer, in one fiber. The programs are built once
 * per route from what `Derive.ts` derived; a request only supplies its input, decoded by the endpoint's own schemas in
 * HttpApi's order (path, payload, headers, query) before its fiber starts, as decoding is pure. As in HttpApi, the
 * middleware run before the decoded request is looked at (an unauthenticated request is a 401 whatever its query), a
 * failure is encoded as the endpoint declares it, and the headers the request's effects added
 * (`ResponseHeaders.addResponseHeaders`, or the platform's pre-response handlers) apply to the answer, whatever its
 * outcome. A failure nobody declared is a logged 500, an interrupted request a 503.
 *
 * The fiber starts with a context of the request's own: the request, the annotations its log lines carry (its request
 * id for every fiber it starts: the runtime's loggers read it there, `Logging.withRequestAnnotations`), its server
 * span. A fiber that finishes at once (a read on SQLite's synchronous driver) is answered at once; any other is awaited.
 */
import { HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Context, Duration, Effect, Either, Exit, FiberRef, Option, ParseResult, Runtime, Tracer } from "effect"
import { RequestLogContext } from "../Operations/Logging.js"
import { CollectedHeaders } from "../ResponseHeaders.js"
import { type Answer, answerFromExit, refusalAnswer, type Served } from "./Answer.js"
import type { EndpointRoute } from "./Derive.js"
import type { ReadBody } from "./Gate.js"
import type { DecodedRequest } from "./Handlers.js"
import * as Refusals from "./Refusals.js"

/** A request to a route that passed the gates, as the server hands it to the pipeline. */
export interface PipelineRequest {
  readonly request: Request
  /** When the server received it (`performance.now()`): the deadline counts from then. */
  readonly started: number
  /** Path parameters, still percent-encoded. */
  readonly params: Readonly<Record<string, string>>
  readonly query: Readonly<Record<string, string | Array<string>>>
  readonly body: ReadBody | undefined
  readonly requestId: string
  /** The request's server span: its fiber runs under it (its child spans and log lines join it). */
  readonly parentSpan?: Tracer.Span | undefined
}

/** What a request's fiber reads of it besides its services. */
export class RequestInput extends Context.Tag("Serving/RequestInput")<RequestInput, {
  readonly request: HttpServerRequest.HttpServerRequest
  /** The headers its answer carries, as handlers and middleware add them (`ResponseHeaders.CollectedHeaders`). */
  readonly added: Record<string, string>
  /** The request as its log lines name it (`Logging.RequestLogContext`). */
  readonly log: { readonly requestId: string; readonly annotations: Record<string, unknown> }
  /** The request as the endpoint's decoders made it, or why they refused it (answered once the middleware passed). */
  readonly decoded: DecodedRequest | Refusals.Refused
}>() {}

/** The path parameters percent-decoded, or undefined when one cannot be. */
const percentDecoded = (params: Readonly<Record<string, string>>): Record<string, string> | undefined => {
  const out: Record<string, string> = {}
  try {
    for (const name in params) out[name] = params[name].includes("%") ? decodeURIComponent(params[name]) : params[name]
  } catch {
    return undefined
  }
  return out
}

/** The request as `route`'s decoders make it, or the refusal of the first part they cannot read. */
const decodeRequest = (
  route: EndpointRoute,
  input: PipelineRequest,
  request: HttpServerRequest.HttpServerRequest
): DecodedRequest | Refusals.Refused => {
  const decoded: DecodedRequest = { request }
  const refuse = (part: Refusals.DecodedPart, error: ParseResult.ParseError) => {
    const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
    return new Refusals.Refused(Refusals.decodeFailure(part, issue, (name) => Array.isArray(input.query[name])))
  }
  if (route.decodePath !== undefined) {
    const params = percentDecoded(input.params)
    if (params === undefined) return new Refusals.Refused(Refusals.unreadablePath(input.request.url.split("?")[0]))
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
  return decoded
}

/** The answer with the headers the request's effects added, once any pre-response handler has seen it. */
const finishAnswer = (
  { added, log: { annotations }, request }: RequestInput["Type"],
  made: Answer | HttpServerResponse.HttpServerResponse
): Effect.Effect<Served> =>
  FiberRef.getWith(HttpApp.currentPreResponseHandlers, (handler): Effect.Effect<Served> => {
    const run = (response: HttpServerResponse.HttpServerResponse) =>
      Option.isNone(handler) ? Effect.succeed(response) : Effect.orDie(handler.value(request, response))
    if (HttpServerResponse.isServerResponse(made)) {
      return Effect.map(run(HttpServerResponse.setHeaders(made, added)), (response) => ({
        response: HttpServerResponse.toWeb(response),
        annotations
      }))
    }
    Object.assign(made.headers, added)
    if (Option.isNone(handler)) return Effect.succeed(made)
    // A pre-response handler sees the answer as a response, whose status and headers it may change.
    return Effect.map(run(HttpServerResponse.empty({ status: made.status, headers: made.headers })), (finished) => ({
      ...made,
      status: finished.status,
      headers: { ...finished.headers }
    }))
  })

/** A route's program: its middleware around its handler, then the answer made from the outcome. */
const makeProgram = (route: EndpointRoute): Effect.Effect<Served> => {
  // A handler's requirements are what its middleware provide (checked where the handlers are typed).
  const handler: Effect.Effect<unknown, unknown, unknown> = Effect.flatMap(
    RequestInput,
    ({ decoded }) => decoded instanceof Refusals.Refused ? Effect.fail(decoded) : route.handler(decoded)
  )
  const served = route.middleware.reduceRight((inner, around) => around(inner), handler)
  const answer = (exit: Exit.Exit<unknown, unknown>) =>
    Effect.flatMap(RequestInput, (input): Effect.Effect<Served> => {
      const made = answerFromExit(route, exit, input.log.annotations)
      if (made !== undefined) return finishAnswer(input, made)
      return Effect.zipRight(
        Effect.logError("unexpected failure", Exit.isFailure(exit) ? exit.cause : undefined),
        finishAnswer(input, refusalAnswer(Refusals.internalError, input.log.annotations))
      )
    })
  return Effect.matchCauseEffect(served, {
    onSuccess: (value) => answer(Exit.succeed(value)),
    onFailure: (cause) => answer(Exit.failCause(cause))
  }) as Effect.Effect<Served>
}

/**
 * The pipeline over the routes, on the given runtime (its logger, its services). A client that goes away interrupts
 * the request's fiber; past `requestTimeout` it is interrupted and answered 503.
 */
export const makePipeline = (
  runtime: Runtime.Runtime<never>,
  routes: ReadonlyArray<EndpointRoute>,
  requestTimeout: Duration.Duration
) => {
  const programs = new Map(routes.map((route) => [route, makeProgram(route)]))
  const { context: { unsafeMap: baseServices }, fiberRefs, runtimeFlags } = runtime
  const timeoutMillis = Duration.toMillis(requestTimeout)

  return (route: EndpointRoute, input: PipelineRequest): Served | Promise<Served> => {
    const request = HttpServerRequest.fromWeb(input.request)
    const log = { requestId: input.requestId, annotations: {} }
    const added: Record<string, string> = {}
    const services = new Map(baseServices)
    services.set(RequestInput.key, { request, added, log, decoded: decodeRequest(route, input, request) })
    services.set(HttpServerRequest.HttpServerRequest.key, request)
    services.set(HttpServerRequest.ParsedSearchParams.key, input.query)
    services.set(RequestLogContext.key, log)
    services.set(CollectedHeaders.key, added)
    if (input.parentSpan !== undefined) services.set(Tracer.ParentSpan.key, input.parentSpan)
    const fiber = Runtime.runFork(
      Runtime.make({ context: Context.unsafeMake(services), fiberRefs, runtimeFlags })
    )(programs.get(route)!)

    /** What the fiber's exit is answered with: its answer, or a 503 when it was interrupted (a 500 if it died). */
    const answerOf = (exit: Exit.Exit<Served>, late: boolean): Served =>
      Exit.isSuccess(exit) ? exit.value : refusalAnswer(
        late ? Refusals.deadlineExceeded : Exit.isInterrupted(exit) ? Refusals.shuttingDown : Refusals.internalError,
        log.annotations
      )
    const done = fiber.unsafePoll()
    if (done !== null) return answerOf(done, false)
    // Only a request that waits needs its deadline kept, and its client's going away noticed.
    const signal = input.request.signal
    const abort = () => fiber.unsafeInterruptAsFork(fiber.id())
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
        resolve(answerOf(exit, late))
      })
    )
  }
}
