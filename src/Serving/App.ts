/**
 * The platform's router as the server uses it, for the server's own routes: its requests run on the same runtime,
 * with the same request context for the log and the same deadline as the endpoints (`Pipeline.timeLeft`).
 */
import { type HttpApp, HttpApp as App, HttpMiddleware, type HttpRouter } from "@effect/platform"
import { Context, Duration, Effect, Runtime, Tracer } from "effect"
import { constTrue, identity } from "effect/Function"
import { RequestLogContext } from "../Operations/Logging.js"
import { appErrors } from "./AppErrors.js"
import { timeLeft } from "./Pipeline.js"
import * as Refusals from "./Refusals.js"

/** How long the request being served has left, in milliseconds. */
class TimeLeft extends Context.Tag("Serving/TimeLeft")<TimeLeft, number>() {}

export const makeAppServer = (
  runtime: Runtime.Runtime<HttpRouter.HttpRouter.DefaultServices>,
  app: HttpApp.Default<unknown, HttpRouter.HttpRouter.DefaultServices>,
  requestTimeout: Duration.Duration
) => {
  // Past its deadline a request is interrupted and answered as an endpoint's is; any other failure is a logged 500.
  const served = Effect.flatMap(TimeLeft, (millis) =>
    Effect.timeoutTo(appErrors(app), {
      duration: Duration.millis(millis),
      onSuccess: identity,
      onTimeout: () => Refusals.refusalResponse(Refusals.deadlineExceeded)
    }))
  // The platform's tracer off: the request already has its server span (`Observability/Observe.ts`), and that tracer
  // would add a second one, with the query string and the request's headers, under a `traceparent` it adopts as sent.
  const handler = App.toWebHandlerRuntime(
    Runtime.setFiberRef(runtime, HttpMiddleware.currentTracerDisabledWhen, constTrue)
  )(served as HttpApp.Default<never, HttpRouter.HttpRouter.DefaultServices>) // `TimeLeft` comes with each request
  const timeoutMillis = Duration.toMillis(requestTimeout)
  /** Serves a request received at `started`, under the request's server span when there is one. */
  return (request: Request, started: number, requestId: string, parentSpan?: Tracer.Span) => {
    const log = { requestId, annotations: {} }
    const context = Context.make(RequestLogContext, log).pipe(
      Context.add(TimeLeft, Math.max(0, timeLeft(started, timeoutMillis)))
    )
    return handler(request, parentSpan === undefined ? context : Context.add(context, Tracer.ParentSpan, parentSpan))
      .then((response) => ({ response, annotations: log.annotations }))
  }
}

export type AppServer = ReturnType<typeof makeAppServer>
