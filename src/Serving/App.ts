/**
 * The platform's router as the server uses it, for the server's own routes: its requests run on the same runtime,
 * with the same request context for the log and the same deadline as the endpoints (`Pipeline.timeLeft`).
 */
import { type HttpApp, HttpApp as App, HttpMiddleware, type HttpRouter } from "@effect/platform"
import { Context, Duration, Runtime, Tracer } from "effect"
import { constTrue } from "effect/Function"
import { RequestLogContext } from "../Operations/Logging.js"
import { refusalAnswer, type Served } from "./Answer.js"
import { timeLeft } from "./Pipeline.js"
import * as Refusals from "./Refusals.js"

export const makeAppServer = (
  runtime: Runtime.Runtime<HttpRouter.HttpRouter.DefaultServices>,
  app: HttpApp.Default<never, HttpRouter.HttpRouter.DefaultServices>,
  requestTimeout: Duration.Duration
) => {
  // The platform's tracer off: the request already has its server span (`Observability/Observe.ts`), and that tracer
  // would add a second one, with the query string and the request's headers, under a `traceparent` it adopts as sent.
  const handler = App.toWebHandlerRuntime(
    Runtime.setFiberRef(runtime, HttpMiddleware.currentTracerDisabledWhen, constTrue)
  )(app)
  const timeoutMillis = Duration.toMillis(requestTimeout)
  /** Serves a request received at `started`, under the request's server span when there is one. */
  return (request: Request, started: number, requestId: string, parentSpan?: Tracer.Span): Promise<Served> => {
    const log = { requestId, annotations: {} }
    const context = Context.make(RequestLogContext, log)
    const deadline = AbortSignal.timeout(Math.max(0, timeLeft(started, timeoutMillis)))
    return handler(
      new Request(request, { signal: AbortSignal.any([request.signal, deadline]) }),
      parentSpan === undefined ? context : Context.add(context, Tracer.ParentSpan, parentSpan)
    ).then((response) =>
      deadline.aborted && !request.signal.aborted
        ? refusalAnswer(Refusals.deadlineExceeded, log.annotations)
        : { response, annotations: log.annotations }
    )
  }
}

export type AppServer = ReturnType<typeof makeAppServer>
