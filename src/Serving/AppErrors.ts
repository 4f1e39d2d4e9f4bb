/**
 * The HttpApi app's answers to what fails inside it, made the pipeline's way: a failed decode becomes the same 400 the
 * pipeline gives (`Refusals.decodeFailure`), a path parameter the router cannot read the same `invalid_path`, an
 * error the API declares is left to the app's own encoder (the same schemas the pipeline encodes with), anything else
 * is a logged 500. The app serves the server's own routes, and any endpoint the pipeline could not derive.
 */
import { HttpApiError, type HttpApp, HttpServerError, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Effect, Option } from "effect"
import * as Refusals from "./Refusals.js"
import { queryOf } from "./Url.js"

const answer = (refusal: Refusals.Refusal) =>
  HttpServerResponse.text(Refusals.refusalBody(refusal), {
    status: refusal.status,
    contentType: "application/json",
    ...(refusal.headers === undefined ? {} : { headers: refusal.headers })
  })

export const appErrors = (options: {
  /** Whether a failure is an error the API declares (its encoder answers it). */
  readonly isDeclared: (error: unknown) => boolean
  /** The header names an endpoint declares, by method and path. */
  readonly declaredHeaders: (method: string, path: string) => ReadonlyArray<string>
}) =>
<E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.catchAllCause(
    app,
    (cause) =>
      Effect.flatMap(
        HttpServerRequest.HttpServerRequest,
        (request): Effect.Effect<HttpServerResponse.HttpServerResponse, E> => {
          const failure = Cause.failureOption(cause)
          const error: unknown = Option.isSome(failure) ? failure.value : Cause.squash(cause)
          const path = request.url.split("?")[0]
          if (error instanceof HttpApiError.HttpApiDecodeError) {
            // Which part of the request the failed decode was about, as far as the app's error tells.
            const issue = error.issues[0]
            const name = String(issue?.path[0] ?? "")
            const query = queryOf(request.url)
            const part = options.declaredHeaders(request.method, path).includes(name)
              ? "header"
              : request.method !== "GET" && request.method !== "HEAD"
              ? "body"
              : name in query
              ? "query"
              : "path"
            return Effect.succeed(answer(Refusals.decodeFailure(part, issue, (name) => Array.isArray(query[name]))))
          }
          if (Option.isSome(failure) && options.isDeclared(error)) return Effect.failCause(cause as Cause.Cause<E>)
          if (Option.isNone(failure) && Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<E>)
          // The router found no route for a path the route table matched: a parameter it could not read (`%zz`).
          if (error instanceof HttpServerError.RouteNotFound) {
            return Effect.succeed(answer(Refusals.unreadablePath(path)))
          }
          if (error instanceof HttpServerError.RequestError) {
            return Effect.succeed(answer(
              error.reason === "Decode"
                ? Refusals.invalidJson("The request body is not valid JSON.")
                : Refusals.unreadableBody
            ))
          }
          return Effect.as(Effect.logError("unexpected failure", cause), answer(Refusals.internalError))
        }
      )
  )
