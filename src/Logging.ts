/**
 * The Effect logger, configured by `LOG_FORMAT` (json lines, or pretty on a terminal) and `LOG_LEVEL`.
 * The server logs to stdout; the other commands log to stderr, so their stdout carries only their output.
 */
import { Effect, Layer, Logger } from "effect"
import { LogFormatConfig, LogLevelConfig } from "./Config.js"

export const LoggingLive = (target: "stdout" | "stderr") =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const format = yield* LogFormatConfig
    const level = yield* LogLevelConfig
    const base = format === "json" ? Logger.jsonLogger : Logger.prettyLoggerDefault
    const logger = format === "json"
      ? (target === "stderr" ? Logger.withConsoleError(Logger.jsonLogger) : Logger.withConsoleLog(Logger.jsonLogger))
      : (target === "stderr" ? Logger.withConsoleError(Logger.prettyLogger({ stderr: true })) : base)
    return Layer.merge(Logger.replace(Logger.defaultLogger, logger), Logger.minimumLogLevel(level))
  }))
