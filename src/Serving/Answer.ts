/**
 * The answer to a request before it is a `Response` (the server adds its own headers and writes the log line from
 * it), and how the pipeline makes one from the outcome of a request: its success as the endpoint encodes it (or the
 * response a handler made itself), a refusal, a declared error as the endpoint encodes it.
 */
import { HttpServerResponse } from "@effect/platform"
import { Cause, Exit, Option } from "effect"
import type { EndpointRoute } from "./Derive.js"
import * as Refusals from "./Refusals.js"
import { Refused } from "./RequestInput.js"

/** An answer before it is a `Response`. */
export interface Answer {
  readonly status: number
  readonly body: string | null
  readonly headers: Record<string, string>
  /** The annotations set while serving the request (the key id its middleware set, …), for its log line. */
  readonly annotations: Readonly<Record<string, unknown>>
}

/** An answer that is already a `Response` (a handler's own, or the HttpApi app's). */
export interface ResponseAnswer {
  readonly response: Response
  readonly annotations: Readonly<Record<string, unknown>>
}

const NONE: Readonly<Record<string, unknown>> = {}

export const refusalAnswer = (refusal: Refusals.Refusal, annotations = NONE): Answer => ({
  status: refusal.status,
  body: Refusals.refusalBody(refusal),
  headers: { "content-type": "application/json", ...refusal.headers },
  annotations
})

const json = (status: number, body: string | null, annotations: Readonly<Record<string, unknown>>): Answer => ({
  status,
  body,
  headers: body === null ? {} : { "content-type": "application/json" },
  annotations
})

/**
 * The answer a finished request gives, made from its outcome: its success as the endpoint encodes it (a response the
 * handler made is kept as it is), a refusal, a declared error as the endpoint encodes it, a 503 for an interrupted
 * request; else `undefined` (a failure nobody declared).
 */
export const answerFromExit = (
  route: EndpointRoute,
  exit: Exit.Exit<unknown, unknown>,
  annotations: Readonly<Record<string, unknown>>
): Answer | HttpServerResponse.HttpServerResponse | undefined => {
  if (Exit.isSuccess(exit)) {
    const value = exit.value
    if (HttpServerResponse.isServerResponse(value)) return value
    return json(route.successStatus, route.encodeSuccess(value), annotations)
  }
  if (Cause.isInterruptedOnly(exit.cause)) return refusalAnswer(Refusals.shuttingDown, annotations)
  const failure = Cause.failureOption(exit.cause)
  if (Option.isNone(failure)) return undefined
  const error = failure.value
  if (error instanceof Refused) return refusalAnswer(error.refusal, annotations)
  const declared = route.failures.find((candidate) => candidate.is(error))
  return declared === undefined ? undefined : json(declared.status, JSON.stringify(declared.encode(error)), annotations)
}
