/**
 * Sampling in front of `@effect/opentelemetry`'s `OtlpTracer`, which exports every span it makes: the OpenTelemetry
 * specification's samplers (`OTEL_TRACES_SAMPLER`) and the W3C `traceparent` a client sends. An unsampled span is
 * `NOT_SAMPLED`, which records nothing, and the spans under it are not sampled either.
 */
import { Headers, HttpTraceContext } from "@effect/platform"
import type { Clock } from "effect"
import { Context, Effect, FiberRef, FiberRefs, HashMap, HashSet, Layer, Logger, Option, Tracer } from "effect"
import { traceIdsOf } from "../Operations/Logging.js"
import type { OtlpOptions } from "./Config.js"

/** A trace id's randomness as `TraceIdRatioBased` reads it: its lowest 56 bits (bytes 9 to 15). */
export const randomnessOf = (traceId: string): number =>
  parseInt(traceId.slice(18, 30), 16) * 256 + parseInt(traceId.slice(30, 32), 16)

/** Whether a new trace, or a span whose parent is in another process, is recorded. */
type Sampler = (randomness: number, remoteParent: Option.Option<Tracer.ExternalSpan>) => boolean

export const makeSampler = ({ ratio, sampler }: OtlpOptions["sampling"]): Sampler => {
  // `traceidratio`: the id's randomness against the ratio, so every process sampling at that ratio decides alike.
  const bound = ratio * 2 ** 56
  const root: (randomness: number) => boolean = sampler.endsWith("always_on")
    ? () => true
    : sampler.endsWith("always_off")
    ? () => false
    : (randomness) => randomness < bound
  if (!sampler.startsWith("parentbased_")) return root
  return (randomness, remoteParent) => Option.isSome(remoteParent) ? remoteParent.value.sampled : root(randomness)
}

const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/

/** The parent a request's `traceparent` names (version 00, lowercase hex, ids not all zero); `None`: a new trace. */
export const remoteParent = (
  headers: { readonly get: (name: string) => string | null }
): Option.Option<Tracer.ExternalSpan> => {
  const traceparent = headers.get("traceparent")
  if (traceparent === null || !TRACEPARENT.test(traceparent)) return Option.none()
  return HttpTraceContext.w3c(Headers.unsafeFromRecord({ traceparent }))
}

/** Every unsampled span: ids of zeros (W3C's "invalid"), nothing recorded. */
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

/** `recording` makes and exports the sampled spans (`OtlpTracer.make`). */
export const makeSamplingTracer = (sampler: Sampler, recording: Tracer.Tracer, clock: Clock.Clock) => {
  // New trace ids are cut from a pool of random bytes, refilled 4 KiB at a time: a trace is decided on its id's bytes
  // (as `randomnessOf` reads them), and the id is written in hexadecimal only when it is sampled.
  const pool = Buffer.alloc(4096)
  let poolAt = pool.length
  /** The trace id a span under `parent` records in, `undefined` when it is not sampled: decided before it is made. */
  const sample = (parent: Option.Option<Tracer.AnySpan>): string | undefined => {
    if (Option.isNone(parent)) {
      if (poolAt === pool.length) {
        crypto.getRandomValues(pool)
        poolAt = 0
      }
      const at = (poolAt += 16) - 16
      const randomness = pool.readUIntBE(at + 9, 6) * 256 + pool[at + 15]
      return sampler(randomness, Option.none()) ? pool.toString("hex", at, at + 16) : undefined
    }
    if (parent.value._tag === "Span") return parent.value.sampled ? parent.value.traceId : undefined
    return sampler(randomnessOf(parent.value.traceId), parent as Option.Some<Tracer.ExternalSpan>)
      ? parent.value.traceId
      : undefined
  }
  const record = (traceId: string, ...args: Parameters<Tracer.Tracer["span"]>): Tracer.Span => {
    const [, parent] = args
    const span = recording.span(...args)
    // The library draws a root's trace id itself: the root takes the id it was sampled on.
    return Option.isNone(parent) ? Object.assign(span, { traceId }) : span
  }
  const tracer = Tracer.make({
    span(name, parent, context, links, startTime, kind) {
      const traceId = sample(parent)
      return traceId === undefined ? NOT_SAMPLED : record(traceId, name, parent, context, links, startTime, kind)
    },
    context: (f) => f()
  })
  return Object.assign(tracer, {
    sample,
    /** A sampled span (`traceId` from `sample`) starting now. */
    start: (name: string, traceId: string, parent: Option.Option<Tracer.AnySpan>, kind: Tracer.SpanKind) =>
      record(traceId, name, parent, Context.empty(), [], clock.unsafeCurrentTimeNanos(), kind)
  })
}

export type SamplingTracer = ReturnType<typeof makeSamplingTracer>

/** Log lines written inside a sampled span carry its `traceId` and `spanId` (annotations the loggers print). */
const withTraceIds = (options: Logger.Logger.Options<unknown>): Logger.Logger.Options<unknown> => {
  const span = Context.getOption(FiberRefs.getOrDefault(options.context, FiberRef.currentContext), Tracer.ParentSpan)
  const ids = Option.isSome(span) ? traceIdsOf(span.value) : undefined
  if (ids === undefined) return options
  return {
    ...options,
    annotations: HashMap.set(HashMap.set(options.annotations, "traceId", ids.traceId), "spanId", ids.spanId)
  }
}

/** Wraps every logger in place (provided below the logger's own layer). */
export const TraceIdsInLogsLive = Layer.scopedDiscard(
  Effect.locallyScopedWith(
    FiberRef.currentLoggers,
    HashSet.map((logger) => Logger.mapInputOptions(logger, withTraceIds))
  )
)
