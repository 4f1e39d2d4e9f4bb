/**
 * A request as the server hands it to the pipeline, and as its fiber sees it.
 */
import type { HttpServerRequest } from "@effect/platform"
import { Context, type Tracer } from "effect"
import type { ReadBody } from "./Gate.js"
import type { DecodedRequest } from "./Handlers.js"
import type { Refusal } from "./Refusals.js"

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
  readonly decoded: DecodedRequest | Refused
}>() {}

/** A request the pipeline refuses itself (a failed decode), carried through the fiber's error channel. */
export class Refused {
  readonly _tag = "Refused"
  constructor(readonly refusal: Refusal) {}
}
