/**
 * An OTLP/HTTP receiver for the tests: it takes what an exporter POSTs to `/v1/traces` (and `/v1/metrics`), decodes
 * the spans from protobuf (`application/x-protobuf`, the OTLP `TracesData` message, read with the small wire-format
 * decoder below) or from JSON, and keeps them, with the raw bodies, for the test to look at. It answers 200, or the
 * status a test sets, or hangs while a test says so.
 */
import { Effect, type Scope } from "effect"

export interface ReceivedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string
  readonly traceState: string
  readonly name: string
  readonly kind: number
  readonly attributes: Record<string, unknown>
  readonly status: { readonly code: number; readonly message: string }
  readonly resource: Record<string, unknown>
  /** The resource's attribute keys in the order sent (a key sent twice is there twice). */
  readonly resourceKeys: ReadonlyArray<string>
}

// ------------------------------------------------------------------------------------------ protobuf wire format

type Field = { readonly wire: number; readonly value: bigint | Uint8Array }

/** A message's fields by number, in order (wire types 0, 1, 2 and 5). */
const fields = (bytes: Uint8Array): Map<number, Array<Field>> => {
  const out = new Map<number, Array<Field>>()
  let at = 0
  const varint = (): bigint => {
    let result = 0n
    let shift = 0n
    for (;;) {
      const byte = bytes[at++]
      result |= BigInt(byte & 0x7f) << shift
      if ((byte & 0x80) === 0) return result
      shift += 7n
    }
  }
  while (at < bytes.length) {
    const tag = Number(varint())
    const wire = tag & 7
    let value: bigint | Uint8Array
    if (wire === 0) value = varint()
    else if (wire === 1) value = (at += 8, bytes.subarray(at - 8, at))
    else if (wire === 5) value = (at += 4, bytes.subarray(at - 4, at))
    else if (wire === 2) {
      const length = Number(varint())
      value = bytes.subarray(at, at + length)
      at += length
    } else throw new Error(`unsupported wire type ${wire}`)
    const list = out.get(tag >> 3) ?? []
    list.push({ wire, value })
    out.set(tag >> 3, list)
  }
  return out
}

const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)
const messages = (map: Map<number, Array<Field>>, n: number) =>
  (map.get(n) ?? []).map((f) => fields(f.value as Uint8Array))
const bytesOf = (map: Map<number, Array<Field>>, n: number) =>
  (map.get(n)?.[0]?.value as Uint8Array | undefined) ?? new Uint8Array()
const intOf = (map: Map<number, Array<Field>>, n: number) =>
  Number((map.get(n)?.[0]?.value as bigint | undefined) ?? 0n)

/** AnyValue: string 1, bool 2, int 3, double 4. */
const anyValue = (map: Map<number, Array<Field>>): unknown => {
  if (map.has(1)) return text(bytesOf(map, 1))
  if (map.has(2)) return intOf(map, 2) === 1
  if (map.has(3)) return Number(BigInt.asIntN(64, map.get(3)![0].value as bigint)) // an int64: two's complement
  if (map.has(4)) {
    const bytes = bytesOf(map, 4)
    return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getFloat64(0, true)
  }
  return undefined
}

const keyValues = (list: Array<Map<number, Array<Field>>>) =>
  Object.fromEntries(list.map((kv) => [text(bytesOf(kv, 1)), anyValue(fields(bytesOf(kv, 2)))]))

/** TracesData → ResourceSpans (1) → { Resource (1), ScopeSpans (2) → Span (2) }. */
export const decodeTracesProtobuf = (body: Uint8Array): Array<ReceivedSpan> =>
  messages(fields(body), 1).flatMap((resourceSpans) => {
    const resourceList = messages(messages(resourceSpans, 1)[0] ?? new Map(), 1)
    const resource = keyValues(resourceList)
    const resourceKeys = resourceList.map((kv) => text(bytesOf(kv, 1)))
    return messages(resourceSpans, 2).flatMap((scopeSpans) =>
      messages(scopeSpans, 2).map((span): ReceivedSpan => {
        const status = messages(span, 15)[0] ?? new Map()
        return {
          traceId: hex(bytesOf(span, 1)),
          spanId: hex(bytesOf(span, 2)),
          traceState: text(bytesOf(span, 3)),
          parentSpanId: hex(bytesOf(span, 4)),
          name: text(bytesOf(span, 5)),
          kind: intOf(span, 6),
          attributes: keyValues(messages(span, 9)),
          status: { code: intOf(status, 3), message: text(bytesOf(status, 2)) },
          resource,
          resourceKeys
        }
      })
    )
  })

// ---------------------------------------------------------------------------------------------------------- JSON

interface JsonKeyValue {
  readonly key: string
  readonly value: { stringValue?: string; boolValue?: boolean; intValue?: string | number; doubleValue?: number }
}

const jsonAttributes = (list: ReadonlyArray<JsonKeyValue> | undefined) =>
  Object.fromEntries((list ?? []).map(({ key, value }) => [
    key,
    value.stringValue ?? value.boolValue ?? (value.intValue !== undefined ? Number(value.intValue) : value.doubleValue)
  ]))

export const decodeTracesJson = (body: any): Array<ReceivedSpan> =>
  (body.resourceSpans ?? []).flatMap((resourceSpans: any) =>
    (resourceSpans.scopeSpans ?? []).flatMap((scopeSpans: any) =>
      (scopeSpans.spans ?? []).map((span: any): ReceivedSpan => ({
        traceId: span.traceId,
        spanId: span.spanId,
        traceState: span.traceState ?? "",
        parentSpanId: span.parentSpanId ?? "",
        name: span.name,
        kind: span.kind,
        attributes: jsonAttributes(span.attributes),
        status: { code: span.status?.code ?? 0, message: span.status?.message ?? "" },
        resource: jsonAttributes(resourceSpans.resource?.attributes),
        resourceKeys: (resourceSpans.resource?.attributes ?? []).map(({ key }: JsonKeyValue) => key)
      }))
    )
  )

// ------------------------------------------------------------------------------------------------------ receiver

export interface Receiver {
  readonly url: string
  readonly spans: Array<ReceivedSpan>
  /** Every body received, as text (protobuf bytes decoded as UTF-8 keep their strings readable). */
  readonly bodies: Array<{ readonly path: string; readonly contentType: string; readonly text: string }>
  readonly headers: Array<Headers>
  /** The status it answers with: 200 unless a test sets another (a collector that fails). */
  status: number
  /** While true, requests are taken and never answered (a collector that hangs): each is open until its sender quits. */
  hanging: boolean
  /** Requests being received or held, now; the most there were at once; those held and given up on by their sender. */
  readonly requests: { readonly open: number; readonly mostOpen: number; readonly abandoned: number }
}

/** A receiver on a free loopback port, for the life of the scope. */
export const otlpReceiver: Effect.Effect<Receiver, never, Scope.Scope> = Effect.gen(function*() {
  const spans: Array<ReceivedSpan> = []
  const bodies: Array<{ path: string; contentType: string; text: string }> = []
  const headers: Array<Headers> = []
  const requests = { open: 0, mostOpen: 0, abandoned: 0 }
  const receiver = { url: "", spans, bodies, headers, status: 200, hanging: false, requests }
  const server = yield* Effect.acquireRelease(
    Effect.sync(() =>
      Bun.serve({
        hostname: "127.0.0.1",
        port: 0,
        idleTimeout: 0, // a held request stays open until its sender quits
        fetch: async (request) => {
          requests.open += 1
          requests.mostOpen = Math.max(requests.mostOpen, requests.open)
          if (receiver.hanging) {
            return new Promise<Response>((answer) =>
              request.signal.addEventListener("abort", () => {
                requests.open -= 1
                requests.abandoned += 1
                answer(new Response(null, { status: 500 }))
              })
            )
          }
          const path = new URL(request.url).pathname
          const contentType = request.headers.get("content-type") ?? ""
          const body = new Uint8Array(await request.arrayBuffer())
          bodies.push({ path, contentType, text: new TextDecoder().decode(body) })
          headers.push(request.headers)
          if (path === "/v1/traces") {
            spans.push(
              ...(contentType.includes("json")
                ? decodeTracesJson(JSON.parse(new TextDecoder().decode(body)))
                : decodeTracesProtobuf(body))
            )
          }
          requests.open -= 1
          return new Response(null, { status: receiver.status })
        }
      })
    ),
    (server) => Effect.promise(() => server.stop(true))
  )
  receiver.url = `http://127.0.0.1:${server.port}`
  return receiver
})
