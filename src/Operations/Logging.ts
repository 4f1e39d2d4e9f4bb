/**
 * The Effect logger, configured by `LOG_FORMAT` (json lines, or pretty on a terminal) and `LOG_LEVEL`.
 * The server logs to stdout; the other commands log to stderr, so their stdout carries only their output.
 */
import { Context, Effect, FiberRef, FiberRefs, HashMap, Layer, Logger, Option } from "effect"
import { logFormat, LogLevelConfig } from "../Config.js"
import { makeLineWriter } from "./LineWriter.js"

/** At most this much log (in characters) waits for a slow reader of stdout; past it, whole lines are dropped. */
export const MAX_BUFFERED_LOG_CHARS = 8 * 1024 * 1024

/**
 * JSON lines to stdout, whole, in order, in one write per turn of the event loop (a write per line cost more than the
 * rest of a request), waiting for a slow reader without holding the event loop (`LineWriter.ts`); whatever is pending
 * when the process exits is written then.
 */
const stdout = makeLineWriter(1, { maxBufferedChars: MAX_BUFFERED_LOG_CHARS, exitWaitMs: 5000 })
process.on("exit", stdout.flushSync)
const stdoutLines = stdout.line

/** How many log lines were dropped so far because stdout's reader was too slow (for a metric). */
export const droppedLogLines = (): number => stdout.dropped()

export interface RequestLogFields {
  readonly method: string
  readonly path: string
  readonly status: number
  readonly durationMs: number
}

/** Writes a request's line: its fields, after the log annotations of the request (its request id, its key id, …). */
export type RequestLogWriter = (fields: RequestLogFields, annotations: Readonly<Record<string, unknown>>) => void

/**
 * The one `request` line of a request, written without going through the Effect logger: the same JSON line
 * `Logger.jsonLogger` prints for `Effect.logInfo("request")` with these annotations, at a fraction of the cost.
 * Present only when the logger is the JSON one on stdout; the caller checks that the level lets INFO through.
 */
export class RequestLog extends Context.Tag("Logging/RequestLog")<RequestLog, RequestLogWriter>() {}

const writeRequestLine: RequestLogWriter = (fields, annotations) => {
  let annotated = ""
  for (const name in annotations) annotated += `${JSON.stringify(name)}:${JSON.stringify(annotations[name])},`
  stdoutLines(
    `{"message":"request","logLevel":"INFO","timestamp":"${
      new Date().toISOString()
    }","annotations":{${annotated}"method":${JSON.stringify(fields.method)},"path":${
      JSON.stringify(fields.path)
    },"status":${fields.status},"durationMs":${fields.durationMs}},"spans":{}}`
  )
}

/**
 * The request being served, as its log lines name it: its id, and the annotations set while serving it (the key id
 * that authenticated). The server puts it in the context of the request's fiber, which the fibers it starts inherit;
 * `withRequestAnnotations` adds it to every line they log.
 */
export class RequestLogContext extends Context.Tag("Logging/RequestLogContext")<RequestLogContext, {
  readonly requestId: string
  readonly annotations: Record<string, unknown>
}>() {}

/**
 * Annotates the request being served: every line logged for it from now on carries the annotation, its `request` line
 * included. Outside a request, the current fiber's log annotations.
 */
export const annotateRequest = (name: string, value: unknown): Effect.Effect<void> =>
  Effect.contextWithEffect((context: Context.Context<never>) => {
    const request = Context.getOption(context, RequestLogContext)
    if (Option.isNone(request)) return FiberRef.update(FiberRef.currentLogAnnotations, HashMap.set(name, value))
    request.value.annotations[name] = value
    return Effect.void
  })

/** The logger, adding to each line the request it is logged for (found in the logging fiber's context). */
export const withRequestAnnotations = <M, O>(logger: Logger.Logger<M, O>): Logger.Logger<M, O> =>
  Logger.mapInputOptions(logger, (options) => {
    const request = Context.getOption(
      FiberRefs.getOrDefault(options.context, FiberRef.currentContext),
      RequestLogContext
    )
    if (Option.isNone(request)) return options
    let annotations = HashMap.set(options.annotations, "requestId", request.value.requestId as unknown)
    for (const name in request.value.annotations) {
      annotations = HashMap.set(annotations, name, request.value.annotations[name])
    }
    return { ...options, annotations }
  })

export const LoggingLive = (target: "stdout" | "stderr") =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const format = yield* logFormat(target)
    const level = yield* LogLevelConfig
    const base = format === "json" ? Logger.jsonLogger : Logger.prettyLoggerDefault
    const logger = format === "json"
      ? (target === "stderr" ? Logger.withConsoleError(Logger.jsonLogger) : Logger.map(Logger.jsonLogger, stdoutLines))
      : (target === "stderr" ? Logger.withConsoleError(Logger.prettyLogger({ stderr: true })) : base)
    const configured = Layer.merge(Logger.replace(Logger.defaultLogger, logger), Logger.minimumLogLevel(level))
    return format === "json" && target === "stdout"
      ? Layer.merge(configured, Layer.succeed(RequestLog, writeRequestLine))
      : configured
  }))
