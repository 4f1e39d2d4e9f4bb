/**
 * The traces' protobuf writer against `@effect/opentelemetry`'s own encoder, given the `TracesData` its `OtlpTracer`
 * builds: for spans with every kind of field the tracer sends (attributes of each type, a remote parent, events,
 * links, an error status, times past 2^53 ns, strings and messages of 128 bytes and more), the bytes are the library's.
 */
import * as OtlpResource from "@effect/opentelemetry/OtlpResource"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option, Tracer } from "effect"
import { encodeTraces, layerProtobuf, type TracesData } from "../src/Observability/OtlpTracesProtobuf.js"
import { decodeTracesProtobuf } from "./support/otlp.js"

const span = (
  name: string,
  parent: Option.Option<Tracer.AnySpan>,
  attributes: Array<[string, unknown]>
) => ({
  traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
  spanId: "00f067aa0ba902b7",
  ...(Option.isSome(parent) ? { parentSpanId: parent.value.spanId } : {}),
  name,
  kind: 2,
  startTimeUnixNano: "1764115200123456789",
  endTimeUnixNano: "1764115200133456789",
  attributes: OtlpResource.entriesToAttributes(attributes),
  droppedAttributesCount: 0,
  events: [{
    name: "retry",
    timeUnixNano: "1764115200125000000",
    attributes: OtlpResource.entriesToAttributes([["attempt", 2]]),
    droppedAttributesCount: 0
  }],
  droppedEventsCount: 0,
  status: { code: 2, message: "boom" },
  links: [{
    traceId: "0af7651916cd43dd8448eb211c80319c",
    spanId: "b7ad6b7169203331",
    attributes: OtlpResource.entriesToAttributes([["reason", "retry of"]]),
    droppedAttributesCount: 0
  }],
  droppedLinksCount: 0
})

const remote = Tracer.externalSpan({ traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "53995c3f42cd8ad8" })
const data: TracesData = {
  resourceSpans: [{
    resource: OtlpResource.make({ serviceName: "petstore", serviceVersion: "1.2.3", attributes: { region: "eu" } }),
    scopeSpans: [{
      scope: { name: "petstore" },
      spans: [
        span("GET /v1/pets/{petId}", Option.some(remote), [
          ["http.request.method", "GET"],
          ["http.response.status_code", 503],
          ["ratio", 0.25],
          ["sampled", true],
          ["empty", ""],
          ["big", 7n],
          ["list", ["a", 1, false]],
          ["text", "Füße 🐕 ".repeat(40)] // past 127 bytes: a length of two bytes
        ]),
        { ...span("SELECT pets", Option.none(), [["db.query.text", "SELECT * FROM pets WHERE id = ?"]]), events: [] }
      ]
    }]
  }]
}

const libraryBytes = Effect.map(
  Effect.provide(OtlpSerialization.OtlpSerialization, OtlpSerialization.layerProtobuf),
  (serialization) => (serialization.traces(data) as unknown as { readonly body: Uint8Array }).body
)

describe("OTLP traces in protobuf", () => {
  it.effect("the bytes are the library's encoder's", () =>
    Effect.gen(function*() {
      const expected = yield* libraryBytes
      expect(Buffer.from(encodeTraces(data)).toString("hex")).toBe(Buffer.from(expected).toString("hex"))
      const decoded = decodeTracesProtobuf(encodeTraces(data))
      expect(decoded.map((each) => each.name)).toEqual(["GET /v1/pets/{petId}", "SELECT pets"])
      expect(decoded[0]).toMatchObject({ parentSpanId: "53995c3f42cd8ad8", status: { code: 2, message: "boom" } })
      expect(decoded[0].attributes).toMatchObject({ ratio: 0.25, sampled: true, big: 7 })
    }))

  it.effect("a negative integer is its 64-bit two's complement (the library's encoder writes one wrong byte)", () =>
    Effect.sync(() => {
      const negative = span("negative", Option.none(), [["delta", -3]])
      const decoded = decodeTracesProtobuf(
        encodeTraces({
          resourceSpans: [{
            ...data.resourceSpans[0],
            scopeSpans: [{ scope: { name: "petstore" }, spans: [negative] }]
          }]
        })
      )
      expect(decoded[0].attributes).toEqual({ delta: -3 })
    }))

  it.effect("a batch larger than the first buffer grows it, and keeps every span", () =>
    Effect.sync(() => {
      const many: TracesData = {
        resourceSpans: [{
          ...data.resourceSpans[0],
          scopeSpans: [{
            scope: { name: "petstore" },
            spans: Array(400).fill(data.resourceSpans[0].scopeSpans[0].spans[0])
          }]
        }]
      }
      expect(decodeTracesProtobuf(encodeTraces(many))).toHaveLength(400)
    }))

  it.effect("the serialization layer writes the traces, and leaves metrics and logs to the library", () =>
    Effect.gen(function*() {
      const ours = yield* Effect.provide(OtlpSerialization.OtlpSerialization, layerProtobuf)
      const body = ours.traces(data) as unknown as { readonly body: Uint8Array; readonly contentType: string }
      expect(body.contentType).toBe("application/x-protobuf")
      expect(body.body).toEqual(encodeTraces(data))
      expect(ours.metrics).toBe(
        (yield* Effect.provide(OtlpSerialization.OtlpSerialization, OtlpSerialization.layerProtobuf)).metrics
      )
    }))
})
