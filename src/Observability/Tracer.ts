/**
 * Sampling in front of `@effect/opentelemetry`'s OTLP tracer, which records and exports every span it is asked for:
 * the OpenTelemetry specification's built-in samplers (`OTEL_TRACES_SAMPLER`) and the W3C trace context a client
 * sends. A span the sampler keeps is the library's; one it drops is one shared span that records nothing, and the
 * spans under it are dropped too, so an unsampled request costs no span.
 */
import { Headers, HttpTraceContext } from "@effect/platform"
import type { Clock } from "effect"
import { Context, Effect, FiberRef, FiberRefs, HashMap, HashSet, Layer, Logger, Option, Tracer } from "effect"
import type { Sampling } from "./Config.js"

// Trace ids are cut from a pool of random bytes, refilled 4 KiB at a time: a new trace is decided on its id's bytes,
// and the id is written out as hexadecimal only when it is sampled.
const pool = Buffer.alloc(4096)
let poolAt = pool.length

const drawTraceId = (): number => {
  if (poolAt + 16 > pool.length) {
    crypto.getRandomValues(pool)
    poolAt = 0
  }
  poolAt += 16
  return poolAt - 16
}

/** A trace id's randomness as `TraceIdRatioBased` reads it: its lowest 56 bits (bytes 9 to 15), from bytes or hex. */
const randomnessAt = (at: number): number => pool.readUIntBE(at + 9, 6) * 256 + pool[at + 15]

export const randomnessOf = (traceId: string): number =>
  parseInt(traceId.slice(18, 30), 16) * 256 + parseInt(traceId.slice(30, 32), 16)

export const newTraceId = (): string => {
  const at = drawTraceId()
  return pool.toString("hex", at, at + 16)
}

/** Whether a new trace root, or a span whose parent is in another process, is recorded. */
export type Sampler = (randomness: number, remoteParent: Option.Option<Tracer.ExternalSpan>) => boolean

export const makeSampler = ({ ratio, sampler }: Sampling): Sampler => {
  // `traceidratio`: the id's randomness against the ratio, so every process sampling at that ratio decides alike.
  const bound = ratio * 2 ** 56
  const root = sampler.endsWith("always_on")
    ? () => true
    : sampler.endsWith("always_off")
    ? () => false
    : (randomness: number) => randomness < bound
  if (!sampler.startsWith("parentbased_")) return (randomness) => root(randomness)
  return (randomness, remoteParent) => Option.isSome(remoteParent) ? remoteParent.value.sampled : root(randomness)
}

const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/

/**
 * The parent a request names in `traceparent` (version 00, lowercase hex, ids not all zero); `None` when absent or
 * malformed: the request then starts a trace of its own, as the W3C specification says.
 */
export const remoteParent = (
  headers: { readonly get: (name: string) => string | null }
): Option.Option<Tracer.ExternalSpan> => {
  const traceparent = headers.get("traceparent")
  if (traceparent === null || !TRACEPARENT.test(traceparent)) return Option.none()
  return HttpTraceContext.w3c(Headers.unsafeFromRecord({ traceparent }))
}

/** What every unsampled span is: ids of zeros (W3C's "invalid"), nothing recorded, and its children unsampled too. */
export const NOT_SAMPLED: Tracer.Span = {
  _tag: "Span",
  name: "",
  spanId: "0000000000000000",
  traceId: "00000000000000000000000000000000",
  parent: Option.none(),
  context: Context.empty(),
  status: { _tag: "Started", startTime: 0n },
  attributes: new Map(),
  links: [],
  sampled: false,
  kind: "internal",
  end: () => {},
  attribute: () => {},
  event: () => {},
  addLinks: () => {}
}

export interface SamplingTracer extends Tracer.Tracer {
  /** The trace id a span under `parent` records in, `undefined` when it is not sampled: decided before it is made. */
  readonly sample: (parent: Option.Option<Tracer.AnySpan>) => string | undefined
  /** A sampled span (`traceId` from `sample`) starting now. */
  readonly start: (
    name: string,
    traceId: string,
    parent: Option.Option<Tracer.AnySpan>,
    kind: Tracer.SpanKind
  ) => Tracer.Span
}

/** `recording` makes and exports the sampled spans (`OtlpTracer.make`). */
export const makeSamplingTracer = (
  sampler: Sampler,
  recording: Tracer.Tracer,
  clock: Clock.Clock
): SamplingTracer => {
  const sample = (parent: Option.Option<Tracer.AnySpan>): string | undefined => {
    if (Option.isNone(parent)) {
      const at = drawTraceId()
      return sampler(randomnessAt(at), Option.none()) ? pool.toString("hex", at, at + 16) : undefined
    }
    if (parent.value._tag === "Span") return parent.value.sampled ? parent.value.traceId : undefined
    return sampler(randomnessOf(parent.value.traceId), parent as Option.Some<Tracer.ExternalSpan>)
      ? parent.value.traceId
      : undefined
  }
  const record = (
    name: string,
    traceId: string,
    parent: Option.Option<Tracer.AnySpan>,
    context: Context.Context<never>,
    links: ReadonlyArray<Tracer.SpanLink>,
    startTime: bigint,
    kind: Tracer.SpanKind
  ): Tracer.Span => {
    const span = recording.span(name, parent, context, links, startTime, kind)
    // The library draws a root's id itself; the root takes the id it was sampled on.
    return Option.isNone(parent) ? Object.assign(span, { traceId }) : span
  }
  const tracer = Tracer.make({
    span(name, parent, context, links, startTime, kind) {
      const traceId = sample(parent)
      return traceId === undefined ? NOT_SAMPLED : record(name, traceId, parent, context, links, startTime, kind)
    },
    context: (f) => f()
  })
  return Object.assign(tracer, {
    sample,
    start: (name: string, traceId: string, parent: Option.Option<Tracer.AnySpan>, kind: Tracer.SpanKind) =>
      record(name, traceId, parent, Context.empty(), [], clock.unsafeCurrentTimeNanos(), kind)
  })
}

/** Log lines written inside a sampled span carry its `traceId` and `spanId` (annotations the loggers print). */
const withTraceIds = (options: Logger.Logger.Options<unknown>): Logger.Logger.Options<unknown> => {
  const context = FiberRefs.getOrDefault(options.context, FiberRef.currentContext)
  const span = Context.getOption(context, Tracer.ParentSpan)
  if (span._tag === "None" || !span.value.sampled) return options
  const annotations = HashMap.set(options.annotations, "traceId", span.value.traceId)
  return { ...options, annotations: HashMap.set(annotations, "spanId", span.value.spanId) }
}

/** Wraps every logger in place (provided below the logger's own layer). */
export const TraceIdsInLogsLive = Layer.scopedDiscard(
  Effect.locallyScopedWith(
    FiberRef.currentLoggers,
    HashSet.map((logger) => Logger.mapInputOptions(logger, withTraceIds))
  )
)
