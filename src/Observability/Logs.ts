/**
 * Log lines written inside a sampled span carry its `traceId` and `spanId` (as annotations, where the JSON and pretty
 * loggers print them), so that a line found in the log leads to its trace and back.
 */
import { Context, FiberRef, FiberRefs, HashMap, HashSet, Layer, Logger, Tracer } from "effect"
import { Effect } from "effect"

const withTraceIds = (options: Logger.Logger.Options<unknown>): Logger.Logger.Options<unknown> => {
  const context = FiberRefs.getOrDefault(options.context, FiberRef.currentContext)
  const span = Context.getOption(context, Tracer.ParentSpan)
  if (span._tag === "None" || !span.value.sampled) return options
  return {
    ...options,
    annotations: HashMap.set(
      HashMap.set(options.annotations, "traceId", span.value.traceId),
      "spanId",
      span.value.spanId
    )
  }
}

/** Wraps every logger in place (to be provided below the logger's own layer). */
export const TraceIdsInLogsLive = Layer.scopedDiscard(
  Effect.locallyScopedWith(
    FiberRef.currentLoggers,
    HashSet.map((logger) => Logger.mapInputOptions(logger, withTraceIds))
  )
)
