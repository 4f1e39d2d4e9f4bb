/**
 * Effect's `Tracer` for petstore: it samples (`Sampler.ts`), records the spans it samples and hands each ended one to
 * a sink (the OTLP exporter); a span it does not sample is one shared object that records nothing, so an unsampled
 * request or statement costs no span. A span whose parent is in this process follows its parent's decision.
 */
import { type Clock, Context, type Exit, Option, Tracer } from "effect"
import type { Sampler } from "./Sampler.js"

export interface SpanSink {
  readonly offer: (span: RecordingSpan) => void
}

// Random ids cut from a pool of random bytes, refilled from the system's generator 4 KiB at a time. Every request
// without a parent draws a trace id and is sampled on it, so a new trace's decision is taken on the bytes themselves
// (`randomnessAt`), and the id is written out as hexadecimal only when it is sampled: an unsampled request makes no
// string (an id and its parsed half were two strings and a parse: 0.14 µs a decision in-process, now 0.02).
const pool = Buffer.alloc(4096)
let poolAt = pool.length

/** Where `count` fresh random bytes start in the pool. */
const draw = (count: number): number => {
  if (poolAt + count > pool.length) {
    crypto.getRandomValues(pool)
    poolAt = 0
  }
  const at = poolAt
  poolAt += count
  return at
}

/**
 * The trace id's randomness, as the OpenTelemetry specification's `TraceIdRatioBased` sampler reads it: its lowest 56
 * bits (bytes 9 to 15), a number. Read the same way from the pool's bytes and from an id's hexadecimal digits, so a
 * trace is decided alike wherever its id came from.
 */
const randomnessAt = (at: number): number =>
  ((((pool[at + 9] * 256 + pool[at + 10]) * 256 + pool[at + 11]) * 256 + pool[at + 12]) * 256 + pool[at + 13]) *
    65536 + pool[at + 14] * 256 + pool[at + 15]

export const randomnessOf = (traceId: string): number =>
  parseInt(traceId.slice(18, 28), 16) * 65536 + parseInt(traceId.slice(28, 32), 16)

/** The id written by the `bytes` bytes at `at` in the pool (a trace id 16, a span id 8). */
const idAt = (at: number, bytes: number): string => pool.toString("hex", at, at + bytes)

export const newTraceId = (): string => idAt(draw(16), 16)
export const newSpanId = (): string => idAt(draw(8), 8)

const NO_LINKS: ReadonlyArray<Tracer.SpanLink> = []
const NO_ATTRIBUTES: ReadonlyMap<string, unknown> = new Map()
const NO_EVENTS: ReadonlyArray<never> = []

type SpanEvent = readonly [name: string, time: bigint, attributes: Record<string, unknown> | undefined]

/**
 * Attributes that every span of one kind has with the same values (a route's server spans, one statement's spans),
 * made once and shared by those spans: a span records only its own (`attributes`), and the protobuf writer writes the
 * shared ones' bytes once (`OtlpTracesProtobuf.ts`). Written before the span's own.
 */
export type SharedAttributes = ReadonlyArray<[key: string, value: unknown]>

export const NO_SHARED_ATTRIBUTES: SharedAttributes = []

export class RecordingSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly sampled = true
  status: Tracer.SpanStatus
  // A statement's span records no attribute of its own (its attributes are shared): no map until one is recorded.
  private recorded: Map<string, unknown> | undefined
  // Most spans have neither links nor events: they share one empty array until they get one.
  links: ReadonlyArray<Tracer.SpanLink>
  events: ReadonlyArray<SpanEvent> = NO_EVENTS

  constructor(
    readonly name: string,
    readonly traceId: string,
    readonly spanId: string,
    readonly parent: Option.Option<Tracer.AnySpan>,
    readonly context: Context.Context<never>,
    links: ReadonlyArray<Tracer.SpanLink>,
    startTime: bigint,
    readonly kind: Tracer.SpanKind,
    /** The W3C `tracestate` of the trace, passed on from the remote parent. */
    readonly traceState: string | undefined,
    private readonly sink: SpanSink,
    readonly sharedAttributes: SharedAttributes = NO_SHARED_ATTRIBUTES
  ) {
    this.links = links.length === 0 ? NO_LINKS : [...links]
    this.status = { _tag: "Started", startTime }
  }

  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    if (this.status._tag === "Ended") return
    this.status = { _tag: "Ended", startTime: this.status.startTime, endTime, exit }
    this.sink.offer(this)
  }

  get attributes(): ReadonlyMap<string, unknown> {
    return this.recorded ?? NO_ATTRIBUTES
  }

  attribute(key: string, value: unknown): void {
    ;(this.recorded ??= new Map()).set(key, value)
  }

  event(name: string, startTime: bigint, attributes?: Record<string, unknown>): void {
    this.events = [...this.events, [name, startTime, attributes]]
  }

  addLinks(links: ReadonlyArray<Tracer.SpanLink>): void {
    this.links = [...this.links, ...links]
  }
}

const ZERO_TRACE = "00000000000000000000000000000000"
const ZERO_SPAN = "0000000000000000"

/** What every unsampled span is: ids of zeros (W3C's "invalid"), nothing recorded, and its children unsampled too. */
export const NOT_SAMPLED: Tracer.Span = {
  _tag: "Span",
  name: "",
  spanId: ZERO_SPAN,
  traceId: ZERO_TRACE,
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

const traceStateOf = (span: Tracer.AnySpan): string | undefined => (span as { traceState?: string }).traceState

export interface SamplingTracer extends Tracer.Tracer {
  /**
   * For the spans petstore starts itself (the request's, its statements'), sampling comes first: the trace id a span
   * under `parent` gets if it is sampled, `undefined` if not — and then nothing is named, timed or allocated for it.
   */
  readonly sample: (parent: Option.Option<Tracer.AnySpan>) => string | undefined
  /** A sampled span (`traceId` from `sample`), starting now, with the attributes it shares with its kind. */
  readonly startSampled: (
    name: string,
    traceId: string,
    parent: Option.Option<Tracer.AnySpan>,
    kind: Tracer.SpanKind,
    shared?: SharedAttributes
  ) => RecordingSpan
}

export const makeTracer = (sampler: Sampler, sink: SpanSink, clock: Clock.Clock): SamplingTracer => {
  const sample = (parent: Option.Option<Tracer.AnySpan>): string | undefined => {
    if (Option.isNone(parent)) {
      const at = draw(16)
      return sampler(randomnessAt(at), Option.none()) ? idAt(at, 16) : undefined
    }
    if (parent.value._tag === "Span") return parent.value.sampled ? parent.value.traceId : undefined
    const traceId = parent.value.traceId
    return sampler(randomnessOf(traceId), parent as Option.Some<Tracer.ExternalSpan>) ? traceId : undefined
  }
  const record = (
    name: string,
    traceId: string,
    parent: Option.Option<Tracer.AnySpan>,
    context: Context.Context<never>,
    links: ReadonlyArray<Tracer.SpanLink>,
    startTime: bigint,
    kind: Tracer.SpanKind,
    shared = NO_SHARED_ATTRIBUTES
  ) => {
    const traceState = Option.isSome(parent) ? traceStateOf(parent.value) : undefined
    return new RecordingSpan(
      name,
      traceId,
      newSpanId(),
      parent,
      context,
      links,
      startTime,
      kind,
      traceState,
      sink,
      shared
    )
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
    startSampled: (
      name: string,
      traceId: string,
      parent: Option.Option<Tracer.AnySpan>,
      kind: Tracer.SpanKind,
      shared?: SharedAttributes
    ) => record(name, traceId, parent, Context.empty(), NO_LINKS, clock.unsafeCurrentTimeNanos(), kind, shared)
  })
}
