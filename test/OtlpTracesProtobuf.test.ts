/**
 * The traces' protobuf writer against `@effect/opentelemetry`'s own encoder of the same spans in the OTLP/JSON shape:
 * for spans with every kind of field the exporter sends (attributes of each type, a remote parent, a trace state,
 * events, links, an error status, times past 2^53 ns, strings and messages of 128 bytes and more), the bytes are the
 * library's. The spans of `http/json`, each written to text as it ends, make the text of the library's JSON request.
 */
import * as OtlpResource from "@effect/opentelemetry/OtlpResource"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Option, Tracer } from "effect"
import { jsonEncoding } from "../src/Observability/Otlp.js"
import { toOtlp } from "../src/Observability/OtlpSpans.js"
import { makeTracesEncoder } from "../src/Observability/OtlpTracesProtobuf.js"
import { RecordingSpan } from "../src/Observability/Tracer.js"
import { decodeTracesProtobuf } from "./support/otlp.js"

const resource = OtlpResource.make({ serviceName: "petstore", serviceVersion: "1.2.3", attributes: { region: "eu" } })
const scope = { name: "petstore" }
const ignore = { offer: () => {} }

const remoteParent = Tracer.externalSpan({ traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "53995c3f42cd8ad8" })
const server = new RecordingSpan(
  "GET /v1/pets/{petId}",
  "4bf92f3577b34da6a3ce929d0e0e4736",
  "00f067aa0ba902b7",
  Option.some(remoteParent),
  Context.empty(),
  [{
    _tag: "SpanLink",
    span: Tracer.externalSpan({ traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331" }),
    attributes: { reason: "retry of" }
  }],
  1764115200123456789n,
  "server",
  "vendor=opaque",
  ignore
)
const values: ReadonlyArray<readonly [string, unknown]> = [
  ["http.request.method", "GET"],
  ["http.response.status_code", 503],
  ["ratio", 0.25],
  ["sampled", true],
  ["empty", ""],
  ["big", 7n],
  ["list", ["a", 1, false]],
  ["text", "Füße 🐕 ".repeat(40)], // past 127 bytes: a length of two bytes
  ["error.type", "SqlError"]
]
for (const [key, value] of values) server.attribute(key, value)
server.event("retry", 1764115200125000000n, { attempt: 2 })
server.end(1764115200133456789n, Exit.fail("boom"))

const statement = new RecordingSpan(
  "SELECT pets",
  "4bf92f3577b34da6a3ce929d0e0e4736",
  "b9c7c989f97918e1",
  Option.none(),
  Context.empty(),
  [],
  1764115200124000000n,
  "client",
  undefined,
  ignore,
  // Shared by every span of this statement, written before the span's own.
  [["db.system.name", "sqlite"], ["db.query.text", "SELECT id FROM pets WHERE id = ?"]]
)
statement.attribute("db.response.returned_rows", 1)
statement.end(1764115200124500000n, Exit.void)

const spans = [server, statement]

/** An ended internal span of the same trace, with these attributes. */
const internalSpan = (name: string, spanId: string, attributes: Record<string, unknown>) => {
  const span = new RecordingSpan(
    name,
    "4bf92f3577b34da6a3ce929d0e0e4736",
    spanId,
    Option.none(),
    Context.empty(),
    [],
    1n,
    "internal",
    undefined,
    ignore
  )
  for (const [key, value] of Object.entries(attributes)) span.attribute(key, value)
  span.end(2n, Exit.void)
  return span
}

/** A batch's export request, each span written into it as it would be when it ended (by a new encoder unless given). */
const encode = (spans: ReadonlyArray<RecordingSpan>, encoder = makeTracesEncoder(resource, scope)) => {
  const batch = encoder.batch()
  for (const span of spans) batch.add(span)
  expect(batch.size).toBe(spans.length)
  return batch.request()
}

/** The export request `@effect/opentelemetry`'s serialization (protobuf or JSON, as `layer` says) makes of `spans`. */
const libraryRequest = (layer: typeof OtlpSerialization.layerProtobuf, spans: ReadonlyArray<RecordingSpan>) =>
  Effect.map(
    Effect.provide(OtlpSerialization.OtlpSerialization, layer),
    (library) =>
      library.traces({
        resourceSpans: [{ resource, scopeSpans: [{ scope, spans: spans.map(toOtlp) }] }]
      }) as unknown as { readonly _tag: string; readonly body: Uint8Array }
  )

describe("OTLP traces in protobuf", () => {
  it.effect("writes the bytes @effect/opentelemetry's encoder writes", () =>
    Effect.gen(function*() {
      const body = yield* libraryRequest(OtlpSerialization.layerProtobuf, spans)
      expect(body._tag).toBe("Uint8Array")
      expect(Buffer.from(encode(spans)).toString("hex")).toBe(Buffer.from(body.body).toString("hex"))
      // A batch of many spans: the outer messages' lengths take several bytes.
      const many = Array.from({ length: 300 }, () => server)
      const manyExpected = yield* libraryRequest(OtlpSerialization.layerProtobuf, many)
      expect(Buffer.from(encode(many)).equals(Buffer.from(manyExpected.body))).toBe(true)
      // A span's length takes two bytes unless told otherwise: one shorter than 128 bytes and one of 16 KiB or more
      // are moved into place.
      const mixed = [
        internalSpan("tiny", "b9c7c989f97918e3", {}),
        server,
        internalSpan("huge", "b9c7c989f97918e3", { "db.query.text": "x".repeat(20_000) }),
        statement
      ]
      const mixedExpected = yield* libraryRequest(OtlpSerialization.layerProtobuf, mixed)
      expect(Buffer.from(encode(mixed)).equals(Buffer.from(mixedExpected.body))).toBe(true)
    }))

  it.effect("the batches of one encoder, each given the room of the largest before it, write the same bytes", () =>
    Effect.gen(function*() {
      const encoder = makeTracesEncoder(resource, scope)
      // Past the first batch's 64 KiB (it grows), then a small batch in the larger room, then one that outgrows it.
      for (const count of [400, 3, 900]) {
        const spansOfBatch = Array.from({ length: count }, (_, i) => i % 2 === 0 ? server : statement)
        const expected = yield* libraryRequest(OtlpSerialization.layerProtobuf, spansOfBatch)
        expect(Buffer.from(encode(spansOfBatch, encoder)).equals(Buffer.from(expected.body))).toBe(true)
      }
    }))

  it("is read back by an OTLP decoder", () => {
    // (Not in the comparison above: the library writes a negative int64 as one byte, which no decoder reads back.)
    const negative = internalSpan("negative", "b9c7c989f97918e2", { negative: -5 })
    const [decodedServer, decodedStatement, decodedNegative] = decodeTracesProtobuf(
      encode([...spans, negative])
    )
    expect(decodedNegative.attributes).toEqual({ negative: -5 })
    expect(decodedServer).toMatchObject({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      parentSpanId: "53995c3f42cd8ad8",
      traceState: "vendor=opaque",
      name: "GET /v1/pets/{petId}",
      kind: 2,
      attributes: { "http.request.method": "GET", "http.response.status_code": 503, ratio: 0.25, sampled: true },
      status: { code: 2, message: "SqlError" },
      resource: { "service.name": "petstore", "service.version": "1.2.3", region: "eu" }
    })
    expect(decodedStatement).toMatchObject({ name: "SELECT pets", kind: 3, parentSpanId: "", status: { code: 0 } })
    expect(decodedStatement.attributes).toEqual({
      "db.system.name": "sqlite",
      "db.query.text": "SELECT id FROM pets WHERE id = ?",
      "db.response.returned_rows": 1
    })
  })
})

describe("OTLP traces in JSON", () => {
  it.effect("the request is the text @effect/opentelemetry's JSON serialization writes", () =>
    Effect.gen(function*() {
      const expected = yield* libraryRequest(OtlpSerialization.layerJson, spans)
      const batch = jsonEncoding(resource).batch()
      for (const span of spans) batch.add(span)
      const body = batch.body() as unknown as {
        readonly body: Uint8Array
        readonly contentType: string
      }
      expect(body.contentType).toBe("application/json")
      expect(new TextDecoder().decode(body.body)).toBe(new TextDecoder().decode(expected.body))
    }))
})
