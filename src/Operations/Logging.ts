/**
 * The Effect logger, configured by `LOG_FORMAT` (json lines, or pretty on a terminal: one line per entry) and
 * `LOG_LEVEL`. The server logs to stdout; the other commands log to stderr, so their stdout carries only their output.
 */
import { Cause, Context, Effect, FiberRef, FiberRefs, HashMap, Layer, Logger, Option, type Tracer } from "effect"
import { logFormat, LogLevelConfig } from "../Config.js"
import { makeLineWriter } from "./LineWriter.js"

/** The annotations of a line logged inside a span: its `traceId` and `spanId`, when it is sampled (else none). */
export const traceIdsOf = (span: Tracer.AnySpan): Readonly<Record<"traceId" | "spanId", string>> | undefined =>
  span.sampled ? { traceId: span.traceId, spanId: span.spanId } : undefined

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

const requestLineTo = (line: (text: string) => void): RequestLogWriter => (fields, annotations) => {
  let annotated = ""
  for (const name in annotations) annotated += `${JSON.stringify(name)}:${JSON.stringify(annotations[name])},`
  line(
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
  Effect.contextWithEffect((context: Context.Context<never>) =>
    annotateRequestIn(context, name, value)
      ? Effect.void
      : FiberRef.update(FiberRef.currentLogAnnotations, HashMap.set(name, value))
  )

/**
 * `annotateRequest` for code that already holds the running fiber's context (in the same step): true when there was a
 * request to annotate, false outside one (then nothing was annotated).
 */
export const annotateRequestIn = (context: Context.Context<never>, name: string, value: unknown): boolean => {
  const request = Context.getOption(context, RequestLogContext)
  if (Option.isNone(request)) return false
  request.value.annotations[name] = value
  return true
}

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

/** A value as a person reads it in a `key=value` pair: bare when it has no space or quote, else quoted. */
const shown = (value: unknown): string => {
  const text = typeof value === "string"
    ? value
    : value instanceof Error
    ? String(value)
    : JSON.stringify(value) ?? String(value)
  return (typeof value === "string" || value instanceof Error) && /[\s"=]/.test(text) ? JSON.stringify(text) : text
}

const twoDigits = (n: number) => String(n).padStart(2, "0")

/**
 * `LOG_FORMAT=pretty`: one line per entry, for a person at a terminal: the local time, the level, the message, then the
 * annotations as `key=value`. A request's line starts with what it was and how it went (`GET /v1/pets 200 1.2ms`). A
 * failure's cause, when there is one, follows on indented lines.
 */
export const prettyLineLogger: Logger.Logger<unknown, string> = Logger.make(
  ({ annotations, cause, date, logLevel, message }) => {
    const fields: Record<string, unknown> = {}
    for (const [name, value] of annotations) fields[name] = value
    const words = (Array.isArray(message) ? message : [message]).map((part) =>
      typeof part === "string" ? part : shown(part)
    )
    if (words.length === 1 && words[0] === "request" && "method" in fields && "status" in fields) {
      const { durationMs, method, path, status, ...rest } = fields
      words.push(`${method} ${path} ${status} ${durationMs}ms`)
      for (const name of Object.keys(fields)) if (!(name in rest)) delete fields[name]
    }
    const time = `${twoDigits(date.getHours())}:${twoDigits(date.getMinutes())}:${twoDigits(date.getSeconds())}.${
      String(date.getMilliseconds()).padStart(3, "0")
    }`
    const pairs = Object.entries(fields).map(([name, value]) => ` ${name}=${shown(value)}`).join("")
    const line = `${time} ${logLevel.label.padEnd(5)} ${words.join(" ")}${pairs}`
    if (Cause.isEmpty(cause)) return line
    return `${line}\n${Cause.pretty(cause, { renderErrorCause: true }).replace(/^/gm, "    ")}`
  }
)

/**
 * JSON lines to stdout go through a `LineWriter`: whole, in order, in one write per turn of the event loop, waiting
 * for a slow reader without holding the event loop; what is still queued when the logger is released is written then.
 */
const stdoutLines = Effect.acquireRelease(
  Effect.sync(() => makeLineWriter(1, { maxBufferedChars: 8 * 1024 * 1024, exitWaitMs: 5000 })),
  (writer) => Effect.sync(writer.flushSync)
)

/** The logger of `LOG_FORMAT` and `LOG_LEVEL`, writing to `target`. */
export const LoggingLive = (target: "stdout" | "stderr") =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const format = yield* logFormat(target)
    const level = Logger.minimumLogLevel(yield* LogLevelConfig)
    const use = (logger: Logger.Logger<unknown, unknown>) =>
      Layer.merge(Logger.replace(Logger.defaultLogger, logger), level)
    if (target === "stderr") {
      const logger = format === "pretty" ? prettyLineLogger : Logger.jsonLogger
      return use(Logger.map(logger, (line) => void process.stderr.write(`${line}\n`)))
    }
    const stdout = yield* stdoutLines
    if (format === "pretty") return use(Logger.map(prettyLineLogger, stdout.line))
    return Layer.merge(
      use(Logger.map(Logger.jsonLogger, stdout.line)),
      Layer.succeed(RequestLog, requestLineTo(stdout.line))
    )
  }))
