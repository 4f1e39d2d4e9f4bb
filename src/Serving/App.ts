/**
 * The HttpApi app as the server uses it: for the server's own routes (and, in the tests that compare the two, for the
 * endpoints the pipeline serves). Its requests run on the same runtime, with the same request context for the log.
 */
import { type HttpApp, HttpApp as App, HttpMiddleware, type HttpRouter } from "@effect/platform"
import { Context, Runtime, Tracer } from "effect"
import { constTrue } from "effect/Function"
import { RequestLogContext } from "../Operations/Logging.js"
import type { ResponseAnswer } from "./Answer.js"
import type { PipelineRequest } from "./Pipeline.js"

export const makeAppServer = (
  runtime: Runtime.Runtime<HttpRouter.HttpRouter.DefaultServices>,
  app: HttpApp.Default<never, HttpRouter.HttpRouter.DefaultServices>
) => {
  // The platform's tracer off: the request already has its server span (`Observability/Observe.ts`), and that tracer
  // would add a second one, with the query string and the request's headers, under a `traceparent` it adopts as sent.
  const handler = App.toWebHandlerRuntime(
    Runtime.setFiberRef(runtime, HttpMiddleware.currentTracerDisabledWhen, constTrue)
  )(app)
  /** Serves a request, under the request's server span when there is one. */
  return (request: Request, requestId: string, parentSpan?: Tracer.Span): Promise<ResponseAnswer> => {
    const log = { requestId, annotations: {} }
    const context = Context.make(RequestLogContext, log)
    return handler(request, parentSpan === undefined ? context : Context.add(context, Tracer.ParentSpan, parentSpan))
      .then((response) => ({ response, annotations: log.annotations }))
  }
}

export type AppServer = ReturnType<typeof makeAppServer>

/** An endpoint's request handed to the app once it passed the gates: the body already read, the client's signal kept. */
export const handToApp = (serve: AppServer) => (_route: unknown, input: PipelineRequest) =>
  serve(
    new Request(input.request.url, {
      method: input.request.method,
      headers: input.request.headers,
      body: input.body?.text ?? null,
      signal: input.request.signal
    }),
    input.requestId,
    input.parentSpan
  )
