/**
 * OTLP traces in protobuf (`http/protobuf`, the specification's default): each recorded span written straight to its
 * `Span` message in its batch's buffer as it ends, and the batch's `ExportTraceServiceRequest` (the messages of
 * `opentelemetry/proto/trace/v1/trace.proto` and `common/v1/common.proto`) made of that buffer, the resource and the
 * scope written once. A nested message gets a one-byte length (a span two), its bytes moved in the rare case the
 * length takes another size, so the output is the canonical encoding — the bytes `@effect/opentelemetry`'s encoder
 * writes for the same spans (a test compares them).
 *
 * Why not the library's encoder, or protobufjs from the OTLP/JSON shape: the library's builds a small array for every
 * field and copies it into its parent at every level (24 µs per span, measured here); going through the OTLP/JSON
 * objects first (an object per span, per attribute and per value) and protobufjs's `Writer` (an operation object
 * per field) took 3.9 µs. This writer takes about 1 µs, and encoding is most of what a sampled request costs.
 */
import type { AnyValue, KeyValue, Resource } from "@effect/opentelemetry/OtlpResource"
import { Inspectable, Option } from "effect"
import { KIND, statusOf, timesOf } from "./OtlpSpans.js"
import type { RecordingSpan, SharedAttributes } from "./Tracer.js"

const VARINT = 0
const FIXED64 = 1
const LENGTH_DELIMITED = 2

/** The value of each hexadecimal digit, by its character code (ids are checked hexadecimal where they come in). */
const HEX = new Uint8Array(128)
for (let digit = 0; digit < 16; digit++) {
  HEX["0123456789abcdef".charCodeAt(digit)] = digit
  HEX["0123456789ABCDEF".charCodeAt(digit)] = digit
}

const varintSize = (value: number): number => {
  let size = 1
  while (value > 127) {
    value = Math.floor(value / 128)
    size++
  }
  return size
}

/** The bytes written so far, with the protobuf primitives. */
class Output {
  bytes: Uint8Array
  buffer: Buffer
  view: DataView
  at = 0

  constructor(size: number) {
    this.bytes = new Uint8Array(size)
    this.buffer = Buffer.from(this.bytes.buffer)
    this.view = new DataView(this.bytes.buffer)
  }

  room(bytes: number): void {
    if (this.at + bytes <= this.bytes.length) return
    const grown = new Uint8Array(Math.max(this.at + bytes, this.bytes.length * 2))
    grown.set(this.bytes.subarray(0, this.at))
    this.bytes = grown
    this.buffer = Buffer.from(grown.buffer)
    this.view = new DataView(grown.buffer)
  }

  /** A non-negative integer below 2^53. */
  varint(value: number): void {
    this.room(10)
    while (value > 127) {
      this.bytes[this.at++] = (value & 127) | 128
      value = Math.floor(value / 128)
    }
    this.bytes[this.at++] = value
  }

  tag(field: number, wireType: number): void {
    this.varint((field << 3) | wireType)
  }

  /** An `int64`: a negative value is its 64-bit two's complement, ten bytes. */
  int64(value: number): void {
    if (value >= 0) return this.varint(value)
    let rest = BigInt.asUintN(64, BigInt(value))
    this.room(10)
    while (rest > 127n) {
      this.bytes[this.at++] = Number(rest & 127n) | 128
      rest >>= 7n
    }
    this.bytes[this.at++] = Number(rest)
  }

  fixed64(value: bigint): void {
    this.room(8)
    this.view.setBigUint64(this.at, BigInt.asUintN(64, value), true)
    this.at += 8
  }

  double(value: number): void {
    this.room(8)
    this.view.setFloat64(this.at, value, true)
    this.at += 8
  }

  raw(bytes: Uint8Array): void {
    this.room(bytes.length)
    this.bytes.set(bytes, this.at)
    this.at += bytes.length
  }

  /**
   * Opens a nested message: its fields follow; `end` with what this returns closes it. Its length gets `reserved`
   * bytes, one unless told (most nested messages are shorter than 128 bytes; a span is usually longer).
   */
  begin(field: number, reserved = 1): number {
    this.tag(field, LENGTH_DELIMITED)
    this.room(reserved)
    const lengthAt = this.at
    this.at += reserved
    return lengthAt
  }

  /**
   * Writes the length of the message opened at `lengthAt`, moving its bytes when the length takes more or fewer bytes
   * than were reserved.
   */
  end(lengthAt: number, reserved = 1): void {
    const length = this.at - lengthAt - reserved
    const size = length < 128 ? 1 : varintSize(length)
    if (size !== reserved) {
      this.room(size - reserved)
      this.bytes.copyWithin(lengthAt + size, lengthAt + reserved, this.at)
      this.at += size - reserved
    }
    const end = this.at
    this.at = lengthAt
    this.varint(length)
    this.at = end
  }

  /** A string field, even an empty one (an `AnyValue`'s string is written whatever it is). */
  stringAlways(field: number, value: string): void {
    const lengthAt = this.begin(field)
    this.room(value.length * 3)
    this.utf8(value)
    this.end(lengthAt)
  }

  /**
   * A string's UTF-8 bytes. Most are short and ASCII (names, routes, methods): copied here, which is several times
   * cheaper than a call into the runtime's encoder, the way for everything else.
   */
  private utf8(value: string): void {
    const length = value.length
    if (length <= 64) {
      const bytes = this.bytes
      const at = this.at
      let i = 0
      for (; i < length; i++) {
        const code = value.charCodeAt(i)
        if (code >= 0x80) break
        bytes[at + i] = code
      }
      if (i === length) {
        this.at += length
        return
      }
    }
    this.at += this.buffer.write(value, this.at, "utf8")
  }

  /** A string field, left out when empty (proto3's default). */
  string(field: number, value: string | undefined): void {
    if (value !== undefined && value !== "") this.stringAlways(field, value)
  }

  /** A `bytes` field given in hexadecimal (an id), left out when empty. */
  hex(field: number, hex: string | undefined): void {
    if (hex === undefined || hex === "") return
    const lengthAt = this.begin(field)
    this.room(hex.length)
    const bytes = this.bytes
    for (let i = 0; i + 1 < hex.length; i += 2) {
      bytes[this.at++] = (HEX[hex.charCodeAt(i)] << 4) | HEX[hex.charCodeAt(i + 1)]
    }
    this.end(lengthAt)
  }

  uint32(field: number, value: number): void {
    if (value === 0) return
    this.tag(field, VARINT)
    this.varint(value)
  }
}

/** How a value is written as an `AnyValue`: a span's attribute as it stands, or the resource's, already in the model. */
type ValueWriter<V> = (out: Output, value: V) => void

/** A `KeyValue` message: its key, then its value as an `AnyValue`. */
const keyValue = <V>(out: Output, field: number, key: string, value: V, write: ValueWriter<V>): void => {
  const message = out.begin(field)
  out.string(1, key)
  const at = out.begin(2)
  write(out, value)
  out.end(at)
  out.end(message)
}

/** An `ArrayValue` (an `AnyValue`'s field 5): each item an `AnyValue`. */
const arrayValue = <V>(out: Output, items: Iterable<V>, write: ValueWriter<V>): void => {
  const list = out.begin(5)
  for (const item of items) {
    const at = out.begin(1)
    write(out, item)
    out.end(at)
  }
  out.end(list)
}

/** An attribute's value, as `@effect/opentelemetry` reads it (`OtlpResource.unknownToAttributeValue`). */
const attributeValue = (out: Output, value: unknown): void => {
  if (Array.isArray(value)) return arrayValue(out, value, attributeValue)
  switch (typeof value) {
    case "string":
      return out.stringAlways(1, value)
    case "boolean":
      out.tag(2, VARINT)
      return out.varint(value ? 1 : 0)
    case "bigint":
      out.tag(3, VARINT)
      return out.int64(Number(value))
    case "number":
      if (Number.isInteger(value)) {
        out.tag(3, VARINT)
        return out.int64(value)
      }
      out.tag(4, FIXED64)
      return out.double(value)
    default:
      return out.stringAlways(1, Inspectable.toStringUnknown(value))
  }
}

const attributes = (out: Output, field: number, entries: Iterable<readonly [string, unknown]>): void => {
  for (const [key, value] of entries) keyValue(out, field, key, value, attributeValue)
}

/** An `AnyValue` already in the OTLP model (the resource's attributes). */
const anyValue = (out: Output, value: AnyValue): void => {
  if (value.stringValue !== undefined && value.stringValue !== null) return out.stringAlways(1, value.stringValue)
  if (value.boolValue !== undefined && value.boolValue !== null) {
    out.tag(2, VARINT)
    return out.varint(value.boolValue ? 1 : 0)
  }
  if (value.intValue !== undefined && value.intValue !== null) {
    out.tag(3, VARINT)
    return out.int64(value.intValue)
  }
  if (value.doubleValue !== undefined && value.doubleValue !== null) {
    out.tag(4, FIXED64)
    return out.double(value.doubleValue)
  }
  if (value.arrayValue !== undefined) return arrayValue(out, value.arrayValue.values, anyValue)
  if (value.kvlistValue !== undefined) {
    const list = out.begin(6)
    keyValues(out, 1, value.kvlistValue.values)
    return out.end(list)
  }
  if (value.bytesValue !== undefined && value.bytesValue !== null) {
    out.tag(7, LENGTH_DELIMITED)
    out.varint(value.bytesValue.length)
    out.raw(value.bytesValue)
  }
}

const keyValues = (out: Output, field: number, values: ReadonlyArray<KeyValue>): void => {
  for (const { key, value } of values) keyValue(out, field, key, value, anyValue)
}

const span = (out: Output, value: RecordingSpan): void => {
  const [start, end] = timesOf(value)
  out.hex(1, value.traceId)
  out.hex(2, value.spanId)
  out.string(3, value.traceState)
  if (Option.isSome(value.parent)) out.hex(4, value.parent.value.spanId)
  out.string(5, value.name)
  out.uint32(6, KIND[value.kind])
  out.tag(7, FIXED64)
  out.fixed64(start)
  out.tag(8, FIXED64)
  out.fixed64(end)
  if (value.sharedAttributes.length > 0) out.raw(sharedAttributesField(value.sharedAttributes))
  attributes(out, 9, value.attributes)
  for (const [name, time, eventAttributes] of value.events) {
    const event = out.begin(11)
    out.tag(1, FIXED64)
    out.fixed64(time)
    out.string(2, name)
    if (eventAttributes !== undefined) attributes(out, 3, Object.entries(eventAttributes))
    out.end(event)
  }
  for (const link of value.links) {
    const at = out.begin(13)
    out.hex(1, link.span.traceId)
    out.hex(2, link.span.spanId)
    attributes(out, 4, Object.entries(link.attributes))
    out.end(at)
  }
  const status = statusOf(value)
  const at = out.begin(15)
  out.string(2, status.message)
  out.tag(3, VARINT)
  out.varint(status.code) // written even when Unset (0), as the library writes it
  out.end(at)
}

/** Bytes written by `write` alone, for the parts of every request that never change. */
const written = (write: (out: Output) => void): Uint8Array => {
  const out = new Output(256)
  write(out)
  return out.bytes.slice(0, out.at)
}

/** The `attributes` fields of shared attributes (`Tracer.SharedAttributes`), written once per set of them. */
const sharedFields = new WeakMap<SharedAttributes, Uint8Array>()
const sharedAttributesField = (shared: SharedAttributes): Uint8Array => {
  let bytes = sharedFields.get(shared)
  if (bytes === undefined) {
    bytes = written((out) => attributes(out, 9, shared))
    sharedFields.set(shared, bytes)
  }
  return bytes
}

/** A span usually takes two bytes for its length (128 to 16 383 bytes long). */
const SPAN_LENGTH_BYTES = 2

/** The first batch's room: about 200 spans. Later batches start with the room of the largest so far, and 1/16 more. */
const BATCH_BYTES = 64 * 1024

/** Spans written one after the other as they end, each a `Span` of `ScopeSpans`, waiting for their export. */
export interface SpanBatch {
  /** How many spans it has. */
  readonly size: number
  /** Writes an ended span into the batch. */
  readonly add: (span: RecordingSpan) => void
  /** The batch's `ExportTraceServiceRequest`. The batch is not to be added to after this. */
  readonly request: () => Uint8Array
}

export interface TracesEncoder {
  /** A new, empty batch. */
  readonly batch: () => SpanBatch
}

/**
 * The encoder of spans and export requests for one resource and instrumentation scope. A batch's spans are written
 * into one buffer, behind room left for what goes before them (the resource and the scope, and the lengths of the two
 * messages around the spans, known only at the end): the request is that buffer, with no span copied or kept apart.
 */
export const makeTracesEncoder = (
  resource: Resource,
  scope: { readonly name: string; readonly version?: string | undefined }
): TracesEncoder => {
  const resourceField = written((out) => {
    const at = out.begin(1)
    keyValues(out, 1, resource.attributes)
    out.uint32(2, resource.droppedAttributesCount)
    out.end(at)
  })
  const scopeField = written((out) => {
    const at = out.begin(1)
    out.string(1, scope.name)
    out.string(2, scope.version)
    out.end(at)
  })
  // The two tags and the two lengths (at most five bytes each, for a request below 4 GiB) around them.
  const headRoom = resourceField.length + scopeField.length + 12
  const head = new Output(headRoom)

  // A batch that outgrows its buffer copies it into one twice the size (a full batch of 512 spans did so twice, from
  // 64 KiB). A batch given the room of the largest before it does not: 8 % less CPU to record and write a sampled get
  // one's two spans, in-process, alternated with the growing buffer. The room only grows, up to what the largest batch
  // (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE` spans) took.
  let batchBytes = BATCH_BYTES
  return {
    batch: () => {
      const out = new Output(batchBytes)
      out.at = headRoom
      let size = 0
      return {
        get size() {
          return size
        },
        add: (value) => {
          const at = out.begin(2, SPAN_LENGTH_BYTES)
          span(out, value)
          out.end(at, SPAN_LENGTH_BYTES)
          size++
        },
        request: () => {
          batchBytes = Math.max(batchBytes, out.at + (out.at >> 4))
          const scopeSpans = scopeField.length + (out.at - headRoom)
          const resourceSpans = resourceField.length + 1 + varintSize(scopeSpans) + scopeSpans
          head.at = 0
          head.tag(1, LENGTH_DELIMITED)
          head.varint(resourceSpans)
          head.raw(resourceField)
          head.tag(2, LENGTH_DELIMITED)
          head.varint(scopeSpans)
          head.raw(scopeField)
          const start = headRoom - head.at
          out.bytes.set(head.bytes.subarray(0, head.at), start)
          return out.bytes.subarray(start, out.at)
        }
      }
    }
  }
}
