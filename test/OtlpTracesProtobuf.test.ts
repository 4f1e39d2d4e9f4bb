/**
 * The traces' protobuf writer against `@effect/opentelemetry`'s own encoder of the same OTLP messages: for spans with
 * every kind of field the exporter sends (attributes of each type, a parent, a trace state, events, links, an error
 * status, times past 2^53 ns), the bytes are the library's.
 */
import * as OtlpResource from "@effect/opentelemetry/OtlpResource"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { encodeTraces, type TracesData } from "../src/Observability/OtlpTracesProtobuf.js"
import { decodeTracesProtobuf } from "./support/otlp.js"

const attributes = OtlpResource.entriesToAttributes([
  ["http.request.method", "GET"],
  ["http.response.status_code", 503],
  ["ratio", 0.25],
  ["sampled", true],
  ["empty", ""],
  ["list", ["a", 1, false]]
])

const data: TracesData = {
  resourceSpans: [{
    resource: OtlpResource.make({ serviceName: "petstore", serviceVersion: "1.2.3", attributes: { region: "eu" } }),
    scopeSpans: [{
      scope: { name: "petstore" },
      spans: [
        {
          traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
          spanId: "00f067aa0ba902b7",
          traceState: "vendor=opaque",
          parentSpanId: "53995c3f42cd8ad8",
          name: "GET /v1/pets/{petId}",
          kind: 2,
          startTimeUnixNano: "1764115200123456789",
          endTimeUnixNano: "1764115200133456789",
          attributes,
          droppedAttributesCount: 0,
          events: [{ name: "retry", timeUnixNano: "1764115200125000000", attributes, droppedAttributesCount: 0 }],
          droppedEventsCount: 0,
          links: [{
            traceId: "0af7651916cd43dd8448eb211c80319c",
            spanId: "b7ad6b7169203331",
            attributes: [],
            droppedAttributesCount: 0
          }],
          droppedLinksCount: 0,
          status: { code: 2, message: "SqlError" }
        },
        {
          traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
          spanId: "b9c7c989f97918e1",
          name: "SELECT pets",
          kind: 3,
          startTimeUnixNano: "1764115200124000000",
          endTimeUnixNano: "1764115200124500000",
          attributes: [],
          droppedAttributesCount: 0,
          events: [],
          droppedEventsCount: 0,
          links: [],
          droppedLinksCount: 0,
          status: { code: 0 }
        }
      ]
    }]
  }]
}

describe("OTLP traces in protobuf", () => {
  it.effect("writes the bytes @effect/opentelemetry's encoder writes", () =>
    Effect.gen(function*() {
      const library = yield* Effect.provide(OtlpSerialization.OtlpSerialization, OtlpSerialization.layerProtobuf)
      const body = library.traces(data)
      expect(body._tag).toBe("Uint8Array")
      const expected = (body as { readonly body: Uint8Array }).body
      expect(Buffer.from(encodeTraces(data)).toString("hex")).toBe(Buffer.from(expected).toString("hex"))
    }))

  it("is read back by an OTLP decoder", () => {
    const [server, statement] = decodeTracesProtobuf(encodeTraces(data))
    expect(server).toMatchObject({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      parentSpanId: "53995c3f42cd8ad8",
      traceState: "vendor=opaque",
      name: "GET /v1/pets/{petId}",
      kind: 2,
      attributes: { "http.request.method": "GET", "http.response.status_code": 503, ratio: 0.25, sampled: true },
      status: { code: 2, message: "SqlError" },
      resource: { "service.name": "petstore", "service.version": "1.2.3", region: "eu" }
    })
    expect(statement).toMatchObject({ name: "SELECT pets", kind: 3, parentSpanId: "", status: { code: 0 } })
  })
})
