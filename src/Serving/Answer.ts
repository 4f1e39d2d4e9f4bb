/**
 * The answer to a request before it is a `Response` (the server adds its own headers and writes the log line from
 * it), and how the pipeline makes one from the outcome of a request.
 */
import { HttpServerResponse } from "@effect/platform"
import { Cause, Either, Exit, Option } from "effect"
import type { EndpointRoute } from "./Derive.js"
import * as Refusals from "./Refusals.js"

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

export type Served = Answer | ResponseAnswer

const json = (status: number, body: string | null, annotations: Readonly<Record<string, unknown>> = {}): Answer => ({
  status,
  body,
  headers: body === null ? {} : { "content-type": "application/json" },
  annotations
})

export const refusalAnswer = (refusal: Refusals.Refusal, annotations?: Readonly<Record<string, unknown>>): Answer => {
  const answer = json(refusal.status, Refusals.refusalBody(refusal), annotations)
  Object.assign(answer.headers, refusal.headers)
  return answer
}

/**
 * The answer a finished request gives: its success as the endpoint's schema encodes it (a response the handler made is
 * kept as it is), a refusal, a declared error as the endpoint encodes it; else the cause to log with a 500: a failure
 * nobody declared, a cause with a defect anywhere in it, an interruption the request's own effects made, or a success
 * or declared error its schema refuses to encode (each a bug).
 */
export const answerFromExit = (
  route: EndpointRoute,
  exit: Exit.Exit<unknown, unknown>,
  annotations: Readonly<Record<string, unknown>>
): Answer | HttpServerResponse.HttpServerResponse | Cause.Cause<unknown> => {
  if (Exit.isSuccess(exit)) {
    if (HttpServerResponse.isServerResponse(exit.value)) return exit.value
    const encoded = route.encodeSuccess(exit.value)
    return Either.isRight(encoded) ? json(route.successStatus, encoded.right, annotations) : Cause.die(encoded.left)
  }
  if (Cause.isDie(exit.cause)) return exit.cause
  const failure = Cause.failureOption(exit.cause)
  if (Option.isNone(failure)) return exit.cause
  if (failure.value instanceof Refusals.Refused) return refusalAnswer(failure.value.refusal, annotations)
  const declared = route.failures.find((candidate) => candidate.is(failure.value))
  if (declared === undefined) return exit.cause
  const encoded = declared.encode(failure.value)
  return Either.isRight(encoded)
    ? json(declared.status, encoded.right, annotations)
    : Cause.sequential(exit.cause, Cause.die(encoded.left))
}
