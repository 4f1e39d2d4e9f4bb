/**
 * Headers a handler or a middleware adds to the answer it is part of (`Location`, `Link`, a 401's challenge, the
 * deprecation headers, rate-limit headers), whatever its outcome (a failure's answer included).
 *
 * Where the request pipeline serves the request, its fiber's context holds the answer's headers (`AnswerHeaders`) and
 * they are added there; elsewhere (the HttpApi app) they ride on the framework's pre-response handlers. Either way the
 * answer carries them.
 */
import { HttpApp, HttpServerResponse } from "@effect/platform"
import { Context, Effect, Option } from "effect"

/** The headers of the answer being made for the current request, as the pipeline collects them. */
export class AnswerHeaders
  extends Context.Tag("ResponseHeaders/AnswerHeaders")<AnswerHeaders, Record<string, string>>()
{}

/**
 * Adds these headers to the answer of the current request. One step of the fiber where the pipeline serves the request
 * (it runs on every request: a middleware's headers, a handler's `Location`).
 */
export const addResponseHeaders = (headers: Readonly<Record<string, string>>): Effect.Effect<void> =>
  Effect.contextWithEffect((context: Context.Context<never>) => {
    const collected = Context.getOption(context, AnswerHeaders)
    if (Option.isNone(collected)) {
      return HttpApp.appendPreResponseHandler((_request, response) =>
        Effect.succeed(HttpServerResponse.setHeaders(response, headers))
      )
    }
    Object.assign(collected.value, headers)
    return Effect.void
  })
