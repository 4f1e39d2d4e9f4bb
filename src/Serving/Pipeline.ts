/**
 * Running one request to a declared endpoint: middleware → handler → answer, in one fiber. The programs are built once
 * per route from what `Derive.ts` derived; a request only supplies its input, decoded by the endpoint's own schemas in
 * HttpApi's order (path, payload, headers, query) before its fiber starts, as decoding is pure. As in HttpApi, the
 * middleware run before the decoded request is looked at (an unauthenticated request is a 401 whatever its query), a
 * failure is encoded as the endpoint declares it, and the headers the request's effects added
 * (`ResponseHeaders.addResponseHeaders`) and the platform's pre-response handlers apply to the answer, whatever its
 * outcome. A failure nobody declared, or any defect, is a 500 logged with its whole cause; an interrupted request is
 * answered for what interrupted it: the deadline (503), the client going away (499), the server's scope closing (503,
 * shutting down).
 *
 * The fiber starts with a context of the request's own over the registration's (`Registration.ts`): the request, the
 * annotations its log lines carry (its request id for every fiber it starts: the runtime's loggers read it there,
 * `Logging.withRequestAnnotations`), its server span, and runs the route's program (`Program.ts`). A fiber that finishes at once (a read on SQLite's synchronous
 * driver) is answered at once; any other joins the pipeline's `FiberSet`, owned by the server's scope, and is awaited.
 */
import { HttpServerRequest } from "@effect/platform"
import { Context, Duration, Effect, Either, Exit, FiberSet, ParseResult, Runtime, RuntimeFlags, Tracer } from "effect"
import { RequestLogContext } from "../Operations/Logging.js"
import { refusalAnswer, type Served } from "./Answer.js"
import type { EndpointRoute } from "./Derive.js"
import type { ReadBody } from "./Gate.js"
import type { DecodedRequest } from "./Handlers.js"
import { makeProgram, RequestInput } from "./Program.js"
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
    const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
    return new Refusals.Refused(
      Refusals.decodeFailure(part, issues, (name) => Array.isArray(input.query[name]), route.bodyShape)
    )
  }
  // A path parameter is read percent-decoded, whether or not the endpoint decodes it further.
  const params = percentDecoded(input.params)
  if (params === undefined) return new Refusals.Refused(Refusals.unreadablePath(input.request.url.split("?")[0]))
  if (route.decodePath !== undefined) {
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

/** Why a request's fiber was interrupted from outside, when it was. */
type Interruption = "deadline" | "client gone" | undefined

/**
 * The pipeline over the routes, on the given runtime (its logger, its services), its waiting fibers in `fibers` (the
 * server's scope closes it, interrupting them; `closing` says when it has begun to). A client that goes away interrupts
 * the request's fiber; past `requestTimeout` (past the time its endpoint holds a request by design, a long poll's) it
 * is interrupted and answered 503.
 */
export const makePipeline = (
  runtime: Runtime.Runtime<never>,
  routes: ReadonlyArray<EndpointRoute>,
  requestTimeout: Duration.Duration,
  fibers: { readonly set: FiberSet.FiberSet; readonly closing: () => boolean }
) => {
  const { context: { unsafeMap: runtimeServices }, fiberRefs, runtimeFlags } = runtime
  // Each route's base services: the registration's, under the runtime's (as HttpApiBuilder merges them).
  const prepared = new Map(routes.map((route) => [route, {
    program: makeProgram(route),
    services: new Map([...route.context.unsafeMap, ...runtimeServices])
  }]))
  const timeoutMillis = Duration.toMillis(requestTimeout)
  // A request's fiber starts uninterruptible: its program lets only its middleware and handler be (`Program.ts`).
  const uninterruptible = RuntimeFlags.disable(runtimeFlags, RuntimeFlags.Interruption)

  return (route: EndpointRoute, input: PipelineRequest): Served | Promise<Served> => {
    const { program, services: base } = prepared.get(route)!
    const request = HttpServerRequest.fromWeb(input.request)
    // The body as sent, for a handler that reads it (a signature, an audit): the gate has read it already.
    if (input.body !== undefined) Object.defineProperty(request, "text", { value: Effect.succeed(input.body.text) })
    const log = { requestId: input.requestId, annotations: {} }
    const services = new Map(base)
    services.set(RequestInput.key, { request, log, decoded: decodeRequest(route, input, request) })
    services.set(HttpServerRequest.HttpServerRequest.key, request)
    services.set(HttpServerRequest.ParsedSearchParams.key, input.query)
    services.set(RequestLogContext.key, log)
    if (input.parentSpan !== undefined) services.set(Tracer.ParentSpan.key, input.parentSpan)
    const fiber = Runtime.runFork(
      Runtime.make({ context: Context.unsafeMake(services), fiberRefs, runtimeFlags: uninterruptible })
    )(program)

    /** What the fiber's exit is answered with: its answer, or why it was interrupted. */
    const answerOf = (exit: Exit.Exit<Served>, interruption: Interruption): Served =>
      Exit.isSuccess(exit) ? exit.value : refusalAnswer(
        interruption === "deadline"
          ? Refusals.deadlineExceeded
          : interruption === "client gone"
          ? Refusals.clientGone
          : fibers.closing()
          ? Refusals.shuttingDown
          : Refusals.internalError,
        log.annotations
      )
    const done = fiber.unsafePoll()
    if (done !== null) return answerOf(done, undefined)
    // Only a request that waits needs its deadline kept, and its client's going away noticed.
    FiberSet.unsafeAdd(fibers.set, fiber)
    const signal = input.request.signal
    let interruption: Interruption
    const interrupt = (why: Interruption) => () => {
      interruption ??= why
      fiber.unsafeInterruptAsFork(fiber.id())
    }
    const abort = interrupt("client gone")
    const deadline = setTimeout(interrupt("deadline"), timeLeft(input.started, timeoutMillis + route.holdMillis))
    signal.addEventListener("abort", abort, { once: true })
    return new Promise((resolve) =>
      fiber.addObserver((exit) => {
        clearTimeout(deadline)
        signal.removeEventListener("abort", abort)
        resolve(answerOf(exit, interruption))
      })
    )
  }
}

/** `REQUEST_TIMEOUT`'s rule, for every request whatever serves it: the time left, counted from its arrival. */
export const timeLeft = (started: number, timeoutMillis: number) => timeoutMillis - (performance.now() - started)
