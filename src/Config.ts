/**
 * The configuration, read from the environment with Effect `Config` (command-line flags may override some of it).
 * A bad value fails with a message that names the variable.
 */
import { Config, LogLevel } from "effect"
import type { Servers } from "./Api.js"

export const Host = Config.string("HOST").pipe(Config.withDefault("0.0.0.0"))
export const Port = Config.port("PORT").pipe(Config.withDefault(8080))

const httpUrl = (name: string, fallback: string) =>
  Config.string(name).pipe(
    Config.withDefault(fallback),
    Config.validate({
      message: "Expected an absolute http(s) URL",
      validation: (value) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol)
    })
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
