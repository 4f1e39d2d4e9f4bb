/**
 * The one `request` line of every request: its method, path (never the query, which may carry what does not belong in
 * a log), status and duration, with the log annotations its fiber ended with (its request id; the key id the
 * authorization middleware set). Written by the JSON writer of `Logging.ts` when there is one (much cheaper than the
 * Effect logger, same line), otherwise through the configured logger.
 */
import { Effect, FiberId, FiberRef, FiberRefs, HashSet, LogLevel, Runtime, type Tracer } from "effect"
import { traceIdsOf, withRequestAnnotations } from "../Operations/Logging.js"
import type { RequestLogWriter } from "../Operations/Logging.js"
import { pathOf } from "./Url.js"

export const makeRequestLogger = (runtime: Runtime.Runtime<never>, writer: RequestLogWriter | undefined) => {
  const minimum = FiberRefs.getOrDefault(runtime.fiberRefs, FiberRef.currentMinimumLogLevel)
  const on = LogLevel.greaterThanEqual(LogLevel.Info, minimum)
  const runFork = Runtime.runFork(runtime)
  /** Logs the line; a sampled server span's trace and span ids go on it (`traceId`, `spanId`). */
  return (
    request: Request,
    status: number,
    started: number,
    annotations: Readonly<Record<string, unknown>> | undefined,
    requestId: string,
    span: Tracer.Span | undefined
  ): void => {
    if (!on) return
    const fields = {
      method: request.method,
      path: pathOf(request.url),
      status,
      durationMs: Math.round((performance.now() - started) * 100) / 100
    }
    const all: Record<string, unknown> = { requestId, ...annotations, ...(span && traceIdsOf(span)) }
    if (writer !== undefined) return writer(fields, all)
    runFork(Effect.logInfo("request").pipe(Effect.annotateLogs({ ...all, ...fields })))
  }
}

export type RequestLogger = ReturnType<typeof makeRequestLogger>

/** The runtime with every logger naming the request a line is logged for (`Logging.withRequestAnnotations`). */
export const withRequestLoggers = <R>(runtime: Runtime.Runtime<R>): Runtime.Runtime<R> =>
  Runtime.updateFiberRefs(runtime, (refs) =>
    FiberRefs.updateAs(refs, {
      fiberId: FiberId.none,
      fiberRef: FiberRef.currentLoggers,
      value: HashSet.map(FiberRefs.getOrDefault(refs, FiberRef.currentLoggers), withRequestAnnotations)
    }))
