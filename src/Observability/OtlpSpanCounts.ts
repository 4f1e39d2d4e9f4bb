/**
 * What becomes of the spans `@effect/opentelemetry`'s `OtlpTracer` makes, and the bound on sending them. The library's
 * exporter (`internal/otlpExporter.ts`) counts nothing and bounds nothing: it sends each full batch in a fiber of its
 * own, however many are already in flight, tries a failed one 3 more times, then pauses for a minute, dropping every
 * span. It is watched, and bounded, where it meets what petstore gives it:
 *
 * - a span's `end`, where the span hands itself to the exporter, which keeps it for the next batch;
 * - the serialization of a batch (`OtlpSerialization.traces`). A batch is everything the exporter kept since the one
 *   before: handed over and not in it is dropped. A batch that would hold more than `OTEL_BSP_MAX_QUEUE_SIZE` spans
 *   in batches waiting or being sent is dropped as it is, never serialized;
 * - the sending of a batch, through the HTTP client: `EXPORTS_IN_FLIGHT` at once, the others waiting their turn, each
 *   sent once and bounded by the transport's timeout. The exporter is always told it went, so it never tries again nor
 *   pauses; a batch the collector did not answer with a 2xx is dropped, and the next is sent as usual: exports resume
 *   with the collector.
 */
import type * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import { HttpBody, HttpClient, HttpClientResponse } from "@effect/platform"
import type { HttpClientRequest } from "@effect/platform"
import { Effect, Exit, Tracer } from "effect"
import type { TracesData } from "./OtlpTracesProtobuf.js"

/** Batches being sent at once, at most: a collector that hangs holds no more requests or sockets. */
export const EXPORTS_IN_FLIGHT = 2

/** The body of every batch dropped before it is serialized: never sent. */
const DROPPED = HttpBody.uint8Array(new Uint8Array(0))

/** What the exporter is told of every batch, whatever became of it. */
const taken = (request: HttpClientRequest.HttpClientRequest) =>
  HttpClientResponse.fromWeb(request, new Response(null, { status: 204 }))

export interface SpanCounts {
  /** Spans in batches the collector answered with a 2xx. */
  readonly exported: number
  /** Spans in batches that were not sent or not taken, and spans the exporter did not keep. */
  readonly dropped: number
  /** Spans handed to the exporter and not yet exported or dropped: waiting for their batch, or being sent. */
  readonly queued: number
}

/** The counts of one exporter, and what watches it: its tracer, serialization and HTTP client, wrapped. */
export const makeSpanCounts = (maxQueueSize: number) => {
  const counts = { exported: 0, dropped: 0, queued: 0 }
  /** Handed over since the last batch. */
  let waiting = 0
  /** Spans in batches waiting for their turn or being sent. */
  let held = 0
  /** Whether a batch of `spans` is refused: it would hold more than the queue's size (alone, it is always taken). */
  const full = (spans: number) => held > 0 && held + spans > maxQueueSize
  const sending = Effect.unsafeMakeSemaphore(EXPORTS_IN_FLIGHT)
  /** The spans in each batch serialized and not yet sent. */
  const batches = new WeakMap<HttpBody.HttpBody, number>()

  const settle = (spans: number, exported: boolean) => {
    counts.queued -= spans
    if (exported) counts.exported += spans
    else counts.dropped += spans
  }

  let libraryEnd: Tracer.Span["end"] | undefined
  /** The `end` of every span of the library's tracer (one function for all of them, from its prototype), counted. */
  function end(this: Tracer.Span, endTime: bigint, exit: Exit.Exit<unknown, unknown>) {
    waiting += 1
    counts.queued += 1
    libraryEnd!.call(this, endTime, exit)
  }

  return {
    counts: counts as SpanCounts,

    /** The library's tracer, its spans counted as they end. */
    tracer: (library: Tracer.Tracer): Tracer.Tracer =>
      Tracer.make({
        span(...args) {
          const span = library.span(...args)
          libraryEnd ??= span.end
          span.end = end
          return span
        },
        context: library.context
      }),

    serialization: (
      library: OtlpSerialization.OtlpSerialization["Type"]
    ): OtlpSerialization.OtlpSerialization["Type"] => ({
      ...library,
      traces: (data) => {
        const spans = (data as TracesData).resourceSpans.reduce(
          (n, { scopeSpans }) => scopeSpans.reduce((m, { spans }) => m + spans.length, n),
          0
        )
        // What was handed over since the last batch and is not in this one, the exporter did not keep. Queued now: this
        // batch, and the batches before it still being sent.
        const refused = waiting - spans
        if (refused > 0) counts.dropped += refused
        counts.queued -= refused
        waiting = 0
        if (full(spans)) {
          settle(spans, false)
          return DROPPED
        }
        try {
          const body = library.traces(data)
          batches.set(body, spans)
          return body
        } catch {
          settle(spans, false)
          return DROPPED
        }
      }
    }),

    /** The client the exporter sends with; what it sends that is not a batch of spans is not looked at. */
    client: (transport: HttpClient.HttpClient): HttpClient.HttpClient =>
      HttpClient.transform(transport, (effect, request) => {
        if (request.body === DROPPED) return Effect.succeed(taken(request))
        const spans = batches.get(request.body)
        if (spans === undefined) return effect
        batches.delete(request.body)
        // Other batches may have been serialized between this one's serialization and now.
        if (full(spans)) {
          settle(spans, false)
          return Effect.succeed(taken(request))
        }
        held += spans
        return effect.pipe(
          sending.withPermits(1),
          Effect.onExit((exit) =>
            Effect.sync(() => {
              held -= spans
              settle(spans, Exit.isSuccess(exit) && exit.value.status >= 200 && exit.value.status < 300)
            })
          ),
          Effect.matchCause({ onFailure: () => taken(request), onSuccess: () => taken(request) })
        )
      })
  }
}
