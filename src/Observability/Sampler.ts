/**
 * Sampling (the OpenTelemetry specification's built-in samplers) and the W3C trace context a client sends.
 */
import { Headers, HttpTraceContext } from "@effect/platform"
import { Option, Tracer } from "effect"
import type { Sampling } from "./Config.js"

/**
 * Decides whether a new trace root, or a span whose parent came from another process, is recorded, given its trace
 * id's randomness (its lowest 56 bits, `Tracer.randomnessOf`).
 */
export type Sampler = (randomness: number, remoteParent: Option.Option<Tracer.ExternalSpan>) => boolean

/**
 * `traceidratio`: the trace id's randomness against the ratio (what the specification's consistent sampling uses), so
 * every process that samples a trace at the same ratio takes the same decision.
 */
const byTraceId = (ratio: number): (randomness: number) => boolean => {
  if (ratio >= 1) return () => true
  if (ratio <= 0) return () => false
  const bound = ratio * 2 ** 56
  return (randomness) => randomness < bound
}

export const makeSampler = ({ ratio, sampler }: Sampling): Sampler => {
  const root = sampler.endsWith("always_on")
    ? () => true
    : sampler.endsWith("always_off")
    ? () => false
    : byTraceId(ratio)
  if (!sampler.startsWith("parentbased_")) return (randomness) => root(randomness)
  return (randomness, remoteParent) => Option.isSome(remoteParent) ? remoteParent.value.sampled : root(randomness)
}

const ALL_ZERO = /^0+$/
const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/

/**
 * The parent a request names in `traceparent` (version 00, lowercase hex, ids not all zero), with its `tracestate`;
 * `None` when absent or malformed (the request then starts a trace of its own, as the W3C specification says).
 */
export const remoteParent = (
  headers: { readonly get: (name: string) => string | null }
): Option.Option<Tracer.ExternalSpan & { readonly traceState: string | undefined }> => {
  const traceparent = headers.get("traceparent")
  if (traceparent === null || !TRACEPARENT.test(traceparent)) return Option.none()
  const parent = HttpTraceContext.w3c(Headers.unsafeFromRecord({ traceparent }))
  if (Option.isNone(parent) || ALL_ZERO.test(parent.value.traceId) || ALL_ZERO.test(parent.value.spanId)) {
    return Option.none()
  }
  const traceState = headers.get("tracestate")
  return Option.some(Object.assign(parent.value, { traceState: traceState === null ? undefined : traceState }))
}
