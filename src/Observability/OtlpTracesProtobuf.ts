/**
 * `OtlpSerialization` for `http/protobuf` with a faster traces encoder: it writes the bytes the library's encoder
 * writes (a test compares them) for the `TracesData` the library's `OtlpTracer` builds, into one growing buffer, where
 * the library's makes an array for every field and copies it into its parent. Metrics and logs stay the library's. Kept
 * because it pays more than 10 % of a traced get one's main-thread CPU (`npm run bench:cpu`).
 */
import type { AnyValue, KeyValue, Resource } from "@effect/opentelemetry/OtlpResource"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import { HttpBody } from "@effect/platform"
import { Effect, Layer } from "effect"

/** The bytes written so far, with the protobuf primitives (wire types: 0 varint, 1 fixed64, 2 length-delimited). */
class Output {
  buffer = Buffer.allocUnsafe(16 * 1024)
  at = 0

  room(bytes: number): void {
    if (this.at + bytes <= this.buffer.length) return
    const grown = Buffer.allocUnsafe(Math.max(this.at + bytes, this.buffer.length * 2))
    this.buffer.copy(grown, 0, 0, this.at)
    this.buffer = grown
  }

  /** A non-negative integer below 2^53, or an `int64` (a negative one is its 64-bit two's complement). */
  varint(value: number): void {
    this.room(10)
    if (value < 0) {
      let rest = BigInt.asUintN(64, BigInt(value))
      for (; rest > 127n; rest >>= 7n) this.buffer[this.at++] = Number(rest & 127n) | 128
      this.buffer[this.at++] = Number(rest)
      return
    }
    for (; value > 127; value = Math.floor(value / 128)) this.buffer[this.at++] = (value & 127) | 128
    this.buffer[this.at++] = value
  }

  tag(field: number, wireType: number): void {
    this.varint((field << 3) | wireType)
  }

  /** A string, or an id written in hexadecimal as its bytes. */
  string(field: number, text: string, encoding: "utf8" | "hex" = "utf8"): void {
    const length = Buffer.byteLength(text, encoding)
    this.tag(field, 2)
    this.varint(length)
    this.room(length)
    this.at += this.buffer.write(text, this.at, encoding)
  }

  /** A `fixed64` given in decimal (nanoseconds since the epoch). */
  fixed64(field: number, decimal: string): void {
    this.tag(field, 1)
    this.room(8)
    this.at = this.buffer.writeBigUInt64LE(BigInt(decimal), this.at)
  }

  /** A varint field, written even when it is 0 (as the library writes these). */
  uint(field: number, value: number): void {
    this.tag(field, 0)
    this.varint(value)
  }

  /** A nested message: its length, written before it, takes one byte, and its bytes move on the rare longer one. */
  message(field: number, write: () => void): void {
    this.tag(field, 2)
    this.room(1)
    const start = ++this.at
    write()
    const length = this.at - start
    if (length < 128) {
      this.buffer[start - 1] = length
      return
    }
    let extra = 0
    for (let rest = length; rest > 127; rest = Math.floor(rest / 128)) extra++
    this.room(extra)
    this.buffer.copy(this.buffer, start + extra, start, this.at)
    const end = this.at + extra
    this.at = start - 1
    this.varint(length)
    this.at = end
  }
}

const anyValue = (out: Output, value: AnyValue): void => {
  if (value.stringValue != null) out.string(1, value.stringValue)
  else if (value.boolValue != null) out.uint(2, value.boolValue ? 1 : 0)
  else if (value.intValue != null) out.uint(3, value.intValue)
  else if (value.doubleValue != null) {
    out.tag(4, 1)
    out.room(8)
    out.at = out.buffer.writeDoubleLE(value.doubleValue, out.at)
  } else if (value.arrayValue !== undefined) {
    const values = value.arrayValue.values
    out.message(5, () => values.forEach((item) => out.message(1, () => anyValue(out, item))))
  }
}

const keyValues = (out: Output, field: number, attributes: ReadonlyArray<KeyValue>): void => {
  for (const { key, value } of attributes) {
    out.message(field, () => {
      out.string(1, key)
      out.message(2, () => anyValue(out, value))
    })
  }
}

type Attributes = ReadonlyArray<KeyValue>

/** A span as the library's tracer hands it over (its OTLP/JSON shape), less its dropped counts (0, never written). */
interface Span {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly startTimeUnixNano: string
  readonly endTimeUnixNano: string
  readonly attributes: Attributes
  readonly events: ReadonlyArray<
    { readonly timeUnixNano: string; readonly name: string; readonly attributes: Attributes }
  >
  readonly links: ReadonlyArray<{ readonly traceId: string; readonly spanId: string; readonly attributes: Attributes }>
  readonly status: { readonly code: number; readonly message?: string }
}

export interface TracesData {
  readonly resourceSpans: ReadonlyArray<{
    readonly resource: Resource
    readonly scopeSpans: ReadonlyArray<
      { readonly scope: { readonly name: string }; readonly spans: ReadonlyArray<Span> }
    >
  }>
}

const span = (out: Output, span: Span): void => {
  out.string(1, span.traceId, "hex")
  out.string(2, span.spanId, "hex")
  if (span.parentSpanId !== undefined) out.string(4, span.parentSpanId, "hex")
  out.string(5, span.name)
  out.uint(6, span.kind)
  out.fixed64(7, span.startTimeUnixNano)
  out.fixed64(8, span.endTimeUnixNano)
  keyValues(out, 9, span.attributes)
  for (const event of span.events) {
    out.message(11, () => {
      out.fixed64(1, event.timeUnixNano)
      out.string(2, event.name)
      keyValues(out, 3, event.attributes)
    })
  }
  for (const link of span.links) {
    out.message(13, () => {
      out.string(1, link.traceId, "hex")
      out.string(2, link.spanId, "hex")
      keyValues(out, 4, link.attributes)
    })
  }
  out.message(15, () => {
    if (span.status.message !== undefined) out.string(2, span.status.message)
    out.uint(3, span.status.code)
  })
}

/** `TracesData` (`opentelemetry/proto/trace/v1/trace.proto`) in protobuf. */
export const encodeTraces = (data: TracesData): Uint8Array => {
  const out = new Output()
  for (const resourceSpans of data.resourceSpans) {
    out.message(1, () => {
      out.message(1, () => keyValues(out, 1, resourceSpans.resource.attributes))
      for (const scopeSpans of resourceSpans.scopeSpans) {
        out.message(2, () => {
          out.message(1, () => out.string(1, scopeSpans.scope.name))
          for (const each of scopeSpans.spans) out.message(2, () => span(out, each))
        })
      }
    })
  }
  return out.buffer.subarray(0, out.at)
}

/** The library's protobuf serialization, its traces written by `encodeTraces`. */
export const layerProtobuf: Layer.Layer<OtlpSerialization.OtlpSerialization> = Layer.effect(
  OtlpSerialization.OtlpSerialization,
  Effect.map(OtlpSerialization.OtlpSerialization, (library) => ({
    ...library,
    traces: (data) => HttpBody.uint8Array(encodeTraces(data as TracesData), "application/x-protobuf")
  }))
).pipe(Layer.provide(OtlpSerialization.layerProtobuf))
