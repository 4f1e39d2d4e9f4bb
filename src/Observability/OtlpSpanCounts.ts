/**
 * What becomes of the spans `@effect/opentelemetry`'s `OtlpTracer` makes: exported, dropped, or queued for export, as
 * plain numbers that `/metrics` reads (`Metrics.addSpanCounts`). The library's exporter (`internal/otlpExporter.ts`)
 * counts nothing; it is watched where it meets what petstore gives it:
 *
 * - a span's `end`, where the span hands itself to the exporter, which keeps it for the next batch, or drops it while
 *   it pauses (below);
 * - the serialization of a batch (`OtlpSerialization.traces`). A batch is everything the exporter kept since the one
 *   before: handed over and not in it is dropped;
 * - each attempt at sending the batch, through the HTTP client. The exporter tries a batch again, 4 attempts in all,
 *   after a failure `HttpClient.retryTransient` calls transient (a transport error or timeout, 408, 429, 500, 502,
 *   503, 504); a batch it gives up on is dropped, and the exporter pauses: for a minute, and until its next export, it
 *   drops every span handed to it.
 *
 * The constants below are the library's (0.61); `test/Metrics.test.ts` fails if its exporter tries a batch otherwise.
 */
import type * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import { type HttpBody, HttpClient, HttpClientError, type HttpClientResponse } from "@effect/platform"
import { Cause, type Clock, Effect, Exit, Option, Tracer } from "effect"
import type { TracesData } from "./OtlpTracesProtobuf.js"

const ATTEMPTS = 4
const TRANSIENT_STATUSES = new Set([408, 429, 500, 502, 503, 504])
const PAUSE_MILLIS = 60_000

/** Whether the exporter tries its batch again after this attempt. */
const triedAgain = (exit: Exit.Exit<HttpClientResponse.HttpClientResponse, unknown>, attempts: number): boolean =>
  attempts < ATTEMPTS && Exit.match(exit, {
    onSuccess: (response) => TRANSIENT_STATUSES.has(response.status),
    onFailure: (cause) =>
      Option.exists(
        Cause.failureOption(cause),
        (error) =>
          HttpClientError.isHttpClientError(error) && error._tag === "RequestError" && error.reason === "Transport"
      )
  })

export interface SpanCounts {
  /** Spans in batches the collector answered with a 2xx. */
  readonly exported: number
  /** Spans in batches the exporter gave up on, and spans it did not keep. */
  readonly dropped: number
  /** Spans handed to the exporter and not yet exported or dropped: waiting for their batch, or being sent. */
  readonly queued: number
}

/** The counts of one exporter, and what watches it: its tracer, serialization and HTTP client, wrapped. */
export const makeSpanCounts = (clock: Clock.Clock) => {
  const counts = { exported: 0, dropped: 0, queued: 0 }
  /** Handed over since the last batch, and not known to be dropped. */
  let waiting = 0
  /** When the exporter gave up on a batch; `undefined` once a batch is serialized again (it exports again). */
  let pausedAt: number | undefined
  const batches = new WeakMap<HttpBody.HttpBody, { readonly spans: number; attempts: number }>()

  const settle = (spans: number, exported: boolean) => {
    counts.queued -= spans
    if (exported) return void (counts.exported += spans)
    counts.dropped += spans
    pausedAt ??= clock.unsafeCurrentTimeMillis()
  }

  const handOver = () => {
    if (pausedAt !== undefined && clock.unsafeCurrentTimeMillis() - pausedAt < PAUSE_MILLIS) {
      counts.dropped += 1
    } else {
      waiting += 1
      counts.queued += 1
    }
  }
  let libraryEnd: Tracer.Span["end"] | undefined
  /** The `end` of every span of the library's tracer (one function for all of them, from its prototype), counted. */
  function end(this: Tracer.Span, endTime: bigint, exit: Exit.Exit<unknown, unknown>) {
    handOver()
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
        // batch, in flight, and the batches before it still being sent.
        const refused = waiting - spans
        if (refused > 0) counts.dropped += refused
        counts.queued -= refused
        waiting = 0
        pausedAt = undefined
        try {
          const body = library.traces(data)
          batches.set(body, { spans, attempts: 0 })
          return body
        } catch (error) {
          settle(spans, false)
          throw error
        }
      }
    }),

    /** The client the exporter sends with; what it sends that is not a batch of spans is not looked at. */
    client: (transport: HttpClient.HttpClient): HttpClient.HttpClient =>
      HttpClient.transform(transport, (effect, request) => {
        const batch = batches.get(request.body)
        if (batch === undefined) return effect
        return Effect.onExit(effect, (exit) =>
          Effect.sync(() => {
            batch.attempts += 1
            if (Exit.isSuccess(exit) && exit.value.status >= 200 && exit.value.status < 300) {
              settle(batch.spans, true)
            } else if (!triedAgain(exit, batch.attempts)) {
              settle(batch.spans, false)
            }
          }))
      })
  }
}
