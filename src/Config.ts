/**
 * The configuration, read from the environment with Effect `Config` (command-line flags may override some of it).
 * A bad value fails with a message that names the variable, the value and the accepted forms; `port` and `duration`
 * below are the constructors for those kinds of variable.
 */
import { Config, ConfigError, Duration, Either, LogLevel, Option } from "effect"
import type { Servers } from "./Api.js"

/** A variable read by `parse`, which answers the value or what the value must be ("must be …"). */
export const variable = <A>(name: string, parse: (text: string) => Either.Either<A, string>): Config.Config<A> =>
  Config.nested(
    Config.string().pipe(
      Config.mapOrFail((text) =>
        Either.mapLeft(
          parse(text.trim()),
          (must) => ConfigError.InvalidData([], `${name} ${must} (got ${JSON.stringify(text)})`)
        )
      )
    ),
    name
  )

export const PORT_RULE = "must be an integer from 1 to 65535"

/** A TCP port: a decimal integer from 1 to 65535. */
export const parsePort = (text: string): Either.Either<number, string> =>
  /^[0-9]{1,5}$/.test(text) && Number(text) >= 1 && Number(text) <= 65535
    ? Either.right(Number(text))
    : Either.left(PORT_RULE)

/** `name`: a TCP port (`PORT must be an integer from 1 to 65535 (got "99999")`). */
export const port = (name: string): Config.Config<number> => variable(name, parsePort)

const UNITS: Record<string, Duration.DurationInput> = {
  ms: "1 millis",
  milli: "1 millis",
  millis: "1 millis",
  millisecond: "1 millis",
  milliseconds: "1 millis",
  s: "1 second",
  sec: "1 second",
  secs: "1 second",
  second: "1 second",
  seconds: "1 second",
  m: "1 minute",
  min: "1 minute",
  mins: "1 minute",
  minute: "1 minute",
  minutes: "1 minute",
  h: "1 hour",
  hour: "1 hour",
  hours: "1 hour"
}

export const DURATION_RULE = "must be a duration such as 2s, 500ms, 2 seconds, 1 minute, or 0"
export const POSITIVE_DURATION_RULE = "must be a positive duration such as 2s, 500ms, 2 seconds or 1 minute"

/** `name`: one of the given words (`LOG_LEVEL must be one of debug, info, warning, error (got "loud")`). */
export const oneOf = <const A extends string>(name: string, values: ReadonlyArray<A>): Config.Config<A> =>
  variable(
    name,
    (text) => values.includes(text as A) ? Either.right(text as A) : Either.left(`must be one of ${values.join(", ")}`)
  )

/**
 * A duration: a number and a unit (ms, s, m, h, or their names: `500ms`, `2s`, `2 seconds`, `1.5 minutes`), or a bare
 * `0`, which is how operators write "none".
 */
export const parseDuration = (text: string): Either.Either<Duration.Duration, string> => {
  if (/^0+(?:\.0+)?$/.test(text)) return Either.right(Duration.zero)
  const match = /^([0-9]+(?:\.[0-9]+)?) ?([a-z]+)$/i.exec(text)
  const unit = match === null ? undefined : UNITS[match[2].toLowerCase()]
  return match === null || unit === undefined
    ? Either.left(DURATION_RULE)
    : Either.right(Duration.times(Duration.decode(unit), Number(match[1])))
}

/** `name`: a duration (`2s`, `500ms`, `2 seconds`, `0`); anything else is refused with the accepted forms. */
export const duration = (name: string): Config.Config<Duration.Duration> => variable(name, parseDuration)

/** `name`: a duration longer than zero, for the waits that zero would turn off or make meaningless. */
export const positiveDuration = (name: string): Config.Config<Duration.Duration> =>
  variable(name, (text) =>
    Either.match(parseDuration(text), {
      onLeft: () => Either.left(POSITIVE_DURATION_RULE),
      onRight: (value) => Duration.toMillis(value) > 0 ? Either.right(value) : Either.left(POSITIVE_DURATION_RULE)
    }))

/**
 * A configuration failure as lines for a person: each names its variable (`PORT must be …`, `PORT: expected …`).
 */
export const describeConfigError = (error: ConfigError.ConfigError): string => {
  switch (error._op) {
    case "And":
    case "Or":
      return [describeConfigError(error.left), describeConfigError(error.right)].join("\n")
    case "InvalidData":
    case "MissingData":
    case "SourceUnavailable":
    case "Unsupported": {
      const name = error.path.join(".")
      return error.message.startsWith(`${name} `) ? error.message : `${name}: ${error.message}`
    }
  }
}

export const Host = Config.string("HOST").pipe(Config.withDefault("0.0.0.0"))
export const Port = port("PORT").pipe(Config.withDefault(8080))

const httpUrl = (name: string, fallback: string) =>
  variable(name, (value) =>
    URL.canParse(value) && /^https?:$/.test(new URL(value).protocol)
      ? Either.right(value)
      : Either.left("must be an absolute http(s) URL such as https://api.example.com/v1")).pipe(
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

export const LogLevelConfig = oneOf("LOG_LEVEL", ["debug", "info", "warning", "error"]).pipe(
  Config.withDefault("info" as const),
  Config.map((name) => levels[name])
)

/** `LOG_FORMAT`; by default pretty when the logs go to a terminal, JSON lines otherwise. */
export const logFormat = (target: "stdout" | "stderr") =>
  oneOf("LOG_FORMAT", ["json", "pretty"]).pipe(
    Config.withDefault(
      (target === "stderr" ? process.stderr : process.stdout).isTTY ? "pretty" as const : "json" as const
    )
  )

export const LogFormatConfig = logFormat("stdout")

/** How long requests in flight may take to finish after SIGTERM/SIGINT (e.g. `10s`, `500ms`; `0`: cut off at once). */
export const ShutdownTimeout = duration("SHUTDOWN_TIMEOUT").pipe(Config.withDefault(Duration.seconds(10)))

/**
 * After SIGTERM/SIGINT, how long the listener keeps serving with readiness already 503, so that a load balancer that
 * polls `/readyz` stops sending before connections are refused (`0`: no delay).
 */
export const ShutdownDelay = duration("SHUTDOWN_DELAY").pipe(Config.withDefault(Duration.seconds(5)))

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
