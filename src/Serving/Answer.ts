/**
 * The answer to a request before it is a `Response` (the server adds its own headers and writes the log line from
 * it), and how the pipeline makes one from the outcome of a request: its success as the endpoint encodes it, a
 * refusal, a declared error as the endpoint encodes it, a 503 for an interrupted request.
 */
import { HttpServerResponse } from "@effect/platform"
import { Cause, Exit, Option } from "effect"
import type { EndpointRoute } from "./Derive.js"
import * as Refusals from "./Refusals.js"
import { Refused, type RequestInput } from "./RequestInput.js"

/** An answer before it is a `Response`. */
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

/** The headers handlers and middleware added (`addResponseHeaders`) over the JSON content type. */
const withJsonType = (added: Record<string, string>): Record<string, string> => {
  if (!("content-type" in added)) added["content-type"] = JSON_HEADERS["content-type"]
  return added
}

/**
 * The answer a finished request gives, made from its outcome (its fiber's exit, or the failure of a middleware that
 * ended it before its fiber started): its success as the endpoint encodes it, a refusal,
 * a declared error as the endpoint encodes it, a 503 for an interrupted request, else `undefined` (a failure nobody
 * declared, logged by the caller as a 500).
 */
export const answerFromExit = (
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
