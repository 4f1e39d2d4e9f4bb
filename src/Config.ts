/**
 * The configuration, read from the environment with Effect `Config` (command-line flags may override some of it).
 * A bad value fails with a message that names the variable.
 */
import { Config, Duration, LogLevel, Option } from "effect"
import type { Servers } from "./Api.js"

export const Host = Config.string("HOST").pipe(Config.withDefault("0.0.0.0"))
export const Port = Config.port("PORT").pipe(Config.withDefault(8080))

// Validated before the default is added, so that a bad value's error names the variable.
const httpUrl = (name: string, fallback: string) =>
  Config.string(name).pipe(
    Config.validate({
      message: "Expected an absolute http(s) URL",
      validation: (value) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol)
    }),
    Config.withDefault(fallback)
  )

export const ServersConfig: Config.Config<Servers> = Config.all({
  production: httpUrl("PUBLIC_URL", "https://api.petstore.example/v1"),
  staging: httpUrl("STAGING_URL", "https://staging.api.petstore.example/v1")
})

const levels = {
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warning: LogLevel.Warning,
  error: LogLevel.Error
} as const

export const LogLevelConfig = Config.literal("debug", "info", "warning", "error")("LOG_LEVEL").pipe(
  Config.withDefault("info" as const),
  Config.map((name) => levels[name])
)

export const LogFormatConfig = Config.literal("json", "pretty")("LOG_FORMAT").pipe(
  Config.withDefault(process.stdout.isTTY ? "pretty" as const : "json" as const)
)

/** How long requests in flight may take to finish after SIGTERM/SIGINT (e.g. `10 seconds`, `500 millis`). */
export const ShutdownTimeout = Config.duration("SHUTDOWN_TIMEOUT").pipe(Config.withDefault(Duration.seconds(10)))

/** `CORS_ORIGINS`: a comma-separated list of origins, or `*`; unset, CORS is off. */
export const CorsOrigins = Config.array(
  Config.string().pipe(
    Config.validate({
      message: "Expected `*` or origins such as https://app.example.com",
      validation: (origin) => origin === "*" || (URL.canParse(origin) && new URL(origin).origin === origin)
    })
  ),
  "CORS_ORIGINS"
).pipe(Config.option, Config.map(Option.filter((origins) => origins.length > 0)))
