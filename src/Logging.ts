/**
 * The Effect logger, configured by `LOG_FORMAT` (json lines, or pretty on a terminal) and `LOG_LEVEL`.
 * The server logs to stdout; the other commands log to stderr, so their stdout carries only their output.
 */
import { Context, Effect, type HashMap, Layer, Logger } from "effect"
import { writeSync } from "node:fs"
import { LogFormatConfig, LogLevelConfig } from "./Config.js"

/**
 * JSON lines to stdout, written in batches: the lines of one turn of the event loop go out in one write at the end of
 * it (a write per line cost more than the rest of a request), and whatever is pending when the process exits is
 * written then. The order of lines is kept.
 */
const stdoutLines = (() => {
  let pending: Array<string> = []
  let scheduled = false
  const flush = () => {
    scheduled = false
    if (pending.length === 0) return
    const text = pending.join("")
    pending = []
    try {
      writeSync(1, text)
    } catch {
      // stdout is gone: nothing else to tell it to
    }
  }
  process.on("exit", flush)
  return (line: string) => {
    pending.push(line + "\n")
    if (!scheduled) {
      scheduled = true
      setImmediate(flush)
    }
  }
})()

export interface RequestLogFields {
  readonly method: string
  readonly path: string
  readonly status: number
  readonly durationMs: number
}

/** Writes a request's line: its fields, after the log annotations of the request (its request id, its key id, …). */
export type RequestLogWriter = (fields: RequestLogFields, annotations: HashMap.HashMap<string, unknown>) => void

/**
 * The one `request` line of a request, written without going through the Effect logger: the same JSON line
 * `Logger.jsonLogger` prints for `Effect.logInfo("request")` with these annotations, at a fraction of the cost.
 * Present only when the logger is the JSON one on stdout; the caller checks that the level lets INFO through.
 */
export class RequestLog extends Context.Tag("Logging/RequestLog")<RequestLog, RequestLogWriter>() {}

const writeRequestLine: RequestLogWriter = (fields, annotations) => {
  let annotated = ""
  for (const [name, value] of annotations) annotated += `${JSON.stringify(name)}:${JSON.stringify(value)},`
  stdoutLines(
    `{"message":"request","logLevel":"INFO","timestamp":"${new Date().toISOString()}","annotations":{${annotated}"method":${
      JSON.stringify(fields.method)
    },"path":${JSON.stringify(fields.path)},"status":${fields.status},"durationMs":${fields.durationMs}},"spans":{}}`
  )
}

export const LoggingLive = (target: "stdout" | "stderr") =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const format = yield* LogFormatConfig
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
