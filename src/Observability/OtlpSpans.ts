/**
 * What OTLP says of a recorded span, for both encodings: its kind's number, its status (the semantic conventions:
 * Error on a failure — a 5xx for a server span, an `error.type` — else Unset), and for `http/json` the span in the
 * OTLP/JSON shape that `@effect/opentelemetry`'s serialization takes. `http/protobuf` writes the same fields straight
 * from the span (`OtlpTracesProtobuf.ts`).
 */
import * as OtlpResource from "@effect/opentelemetry/OtlpResource"
import { Cause, Exit, Option } from "effect"
import type { RecordingSpan } from "./Tracer.js"

export const KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const
const STATUS_UNSET = 0
const STATUS_ERROR = 2

export interface OtlpStatus {
  readonly code: number
  readonly message?: string
}

const UNSET: OtlpStatus = { code: STATUS_UNSET }

/** An ended span's status. */
export const statusOf = (span: RecordingSpan): OtlpStatus => {
  const status = span.status as Extract<RecordingSpan["status"], { _tag: "Ended" }>
  const errorType = span.attributes.get("error.type")
  const failed = errorType !== undefined ||
    (Exit.isFailure(status.exit) && !Cause.isInterruptedOnly(status.exit.cause))
  return failed ? { code: STATUS_ERROR, message: typeof errorType === "string" ? errorType : "failed" } : UNSET
}

/** An ended span's start and end, in nanoseconds since the epoch. */
export const timesOf = (span: RecordingSpan): readonly [start: bigint, end: bigint] => {
  const status = span.status as Extract<RecordingSpan["status"], { _tag: "Ended" }>
  return [status.startTime, status.endTime]
}

/** A span in the OTLP/JSON shape that `OtlpSerialization` encodes. */
export const toOtlp = (span: RecordingSpan) => {
  const [start, end] = timesOf(span)
  return {
    traceId: span.traceId,
    spanId: span.spanId,
    traceState: span.traceState,
    parentSpanId: Option.isSome(span.parent) ? span.parent.value.spanId : undefined,
    name: span.name,
    kind: KIND[span.kind],
    startTimeUnixNano: String(start),
    endTimeUnixNano: String(end),
    attributes: OtlpResource.entriesToAttributes([...span.sharedAttributes, ...span.attributes]),
    droppedAttributesCount: 0,
    events: span.events.map(([name, time, attributes]) => ({
      name,
      timeUnixNano: String(time),
      attributes: attributes === undefined ? [] : OtlpResource.entriesToAttributes(Object.entries(attributes)),
      droppedAttributesCount: 0
    })),
    droppedEventsCount: 0,
    status: statusOf(span),
    links: span.links.map((link) => ({
      traceId: link.span.traceId,
      spanId: link.span.spanId,
      attributes: OtlpResource.entriesToAttributes(Object.entries(link.attributes)),
      droppedAttributesCount: 0
    })),
    droppedLinksCount: 0
  }
}
