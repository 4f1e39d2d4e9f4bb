/**
 * The one `request` line of every request: its method, path (never the query, which may carry what does not belong in
 * a log), status and duration, with the log annotations its fiber ended with (its request id; the key id the
 * authorization middleware set). Written by the JSON writer of `Logging.ts` when there is one (much cheaper than the
 * Effect logger, same line), otherwise through the configured logger.
 */
import { Effect, FiberRef, FiberRefs, HashMap, LogLevel, Runtime } from "effect"
import type { RequestLogWriter } from "../Logging.js"
import { pathOf } from "./Url.js"

export type RequestLogger = (
  request: Request,
  status: number,
  started: number,
  annotations: HashMap.HashMap<string, unknown> | undefined,
  requestId: string
) => void

export const makeRequestLogger = (runtime: Runtime.Runtime<never>, writer: RequestLogWriter | undefined): RequestLogger => {
  const minimum = FiberRefs.getOrDefault(runtime.fiberRefs, FiberRef.currentMinimumLogLevel)
  if (!LogLevel.greaterThanEqual(LogLevel.Info, minimum)) return () => {}
  const runFork = Runtime.runFork(runtime)
  return (request, status, started, annotations, requestId) => {
    const fields = {
      method: request.method,
      path: pathOf(request.url),
      status,
      durationMs: Math.round((performance.now() - started) * 100) / 100
    }
    const all = HashMap.set(annotations ?? HashMap.empty(), "requestId", requestId)
    if (writer !== undefined) return writer(fields, all)
    runFork(Effect.logInfo("request").pipe(Effect.annotateLogs({ ...Object.fromEntries(all), ...fields })))
  }
}
