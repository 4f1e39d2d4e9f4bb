/**
 * The configuration, read from the environment with Effect `Config` (command-line flags may override some of it).
 * A bad value fails with a message that names the variable, the value and the accepted forms.
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

/** A TCP port: a decimal integer from 1 to 65535 (the rule of `PORT` and of `--port`). */
export const parsePort = (text: string): Either.Either<number, string> =>
  /^[0-9]{1,5}$/.test(text) && Number(text) >= 1 && Number(text) <= 65535
    ? Either.right(Number(text))
    : Either.left("must be an integer from 1 to 65535")

/** A positive integer of at most nine digits; `what` says what it counts, in the refusal ("…, such as 7"). */
export const positiveInteger = (name: string, what: string): Config.Config<number> =>
  variable(
    name,
    (text) =>
      /^[0-9]{1,9}$/.test(text) && Number(text) >= 1
        ? Either.right(Number(text))
        : Either.left(`must be a positive integer, ${what}`)
  )

/** `name`: one of the given words (`LOG_LEVEL must be one of debug, info, warning, error (got "loud")`). */
const oneOf = <const A extends string>(name: string, values: ReadonlyArray<A>): Config.Config<A> =>
  variable(
    name,
    (text) => values.includes(text as A) ? Either.right(text as A) : Either.left(`must be one of ${values.join(", ")}`)
  )

const DURATION_RULE = "must be a duration such as 2s, 500ms, 2 seconds, 1 minute, or 0"
const POSITIVE_DURATION_RULE = "must be a positive duration such as 2s, 500ms, 2 seconds or 1 minute"

/** A number and a unit: milliseconds, seconds, minutes or hours, each by its symbol or its name. */
const DURATION =
  /^([0-9]+(?:\.[0-9]+)?) ?(?:(ms|millis?|milliseconds?)|(s|secs?|seconds?)|(m|mins?|minutes?)|(h|hours?))$/i
const UNIT_MILLIS = [1, 1_000, 60_000, 3_600_000]

/** A duration (`500ms`, `2s`, `2 seconds`, `1.5 minutes`), or a bare `0`, which is how operators write "none". */
export const parseDuration = (text: string): Either.Either<Duration.Duration, string> => {
  if (/^0+(?:\.0+)?$/.test(text)) return Either.right(Duration.zero)
  const match = DURATION.exec(text)
  if (match === null) return Either.left(DURATION_RULE)
  const unit = match.slice(2).findIndex((group) => group !== undefined)
  return Either.right(Duration.millis(Number(match[1]) * UNIT_MILLIS[unit]))
}

/** `name`: a duration (`2s`, `500ms`, `2 seconds`, `0`). */
export const duration = (name: string): Config.Config<Duration.Duration> => variable(name, parseDuration)

/** `name`: a duration longer than zero, for the waits that zero would turn off or make meaningless. */
export const positiveDuration = (name: string): Config.Config<Duration.Duration> =>
  variable(name, (text) => {
    const parsed = parseDuration(text)
    return Either.isRight(parsed) && Duration.toMillis(parsed.right) > 0 ? parsed : Either.left(POSITIVE_DURATION_RULE)
  })

/** A configuration failure as lines for a person, each naming its variable (`PORT must be …`, `PORT: expected …`). */
export const describeConfigError = (error: ConfigError.ConfigError): string => {
  if (error._op === "And" || error._op === "Or") {
    return `${describeConfigError(error.left)}\n${describeConfigError(error.right)}`
  }
  const name = error.path.join(".")
  return error.message.startsWith(`${name} `) ? error.message : `${name}: ${error.message}`
}

/** A setting a command-line flag overrides: the flag's value when it was given, else the variable's. */
export const flagOr = <A>(flag: Option.Option<A>, setting: Config.Config<A>): Config.Config<A> =>
  Option.match(flag, { onNone: () => setting, onSome: Config.succeed })

export const Host = Config.string("HOST").pipe(Config.withDefault("0.0.0.0"))

/** A host that listens on every address of the machine: `0.0.0.0`, `::` (and an empty one, which Bun takes so). */
export const isWildcardHost = (host: string): boolean => host === "" || host === "0.0.0.0" || host === "::"
export const Port = variable("PORT", parsePort).pipe(Config.withDefault(8080))

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

const LEVELS = { debug: LogLevel.Debug, info: LogLevel.Info, warning: LogLevel.Warning, error: LogLevel.Error }

export const LogLevelConfig = oneOf("LOG_LEVEL", Object.keys(LEVELS) as Array<keyof typeof LEVELS>).pipe(
  Config.withDefault("info" as const),
  Config.map((name) => LEVELS[name])
)

/** `LOG_FORMAT`; by default pretty when the logs go to a terminal, JSON lines otherwise. */
export const logFormat = (target: "stdout" | "stderr") =>
  oneOf("LOG_FORMAT", ["json", "pretty"]).pipe(
    Config.withDefault(process[target].isTTY ? "pretty" as const : "json" as const)
  )

/** How long requests in flight may take to finish after SIGTERM/SIGINT (e.g. `10s`, `500ms`; `0`: cut off at once). */
export const ShutdownTimeout = duration("SHUTDOWN_TIMEOUT").pipe(Config.withDefault(Duration.seconds(10)))

/**
 * After SIGTERM/SIGINT, how long the listener keeps serving with readiness already 503, so that a load balancer that
 * polls `/readyz` stops sending before connections are refused (`0`: no delay).
 */
export const ShutdownDelay = duration("SHUTDOWN_DELAY").pipe(Config.withDefault(Duration.seconds(5)))

const ORIGINS_RULE = "must be * or comma-separated origins such as https://app.example.com"

/**
 * One origin of `CORS_ORIGINS`: `scheme://host[:port]`, exactly as a browser sends it in `Origin`; else why not (a
 * trailing slash, a path, a query, something that is no http(s) URL).
 */
const parseOrigin = (origin: string): Either.Either<string, string> => {
  if (origin === "*") return Either.right(origin)
  const url = URL.canParse(origin) ? new URL(origin) : undefined
  if (url === undefined || !/^https?:$/.test(url.protocol)) {
    return Either.left(`${ORIGINS_RULE}: ${JSON.stringify(origin)} is not an http(s) origin`)
  }
  if (url.origin === origin) return Either.right(origin)
  const why = url.pathname === "/" && url.search === "" && url.hash === "" && origin.endsWith("/")
    ? "ends with a slash, which no browser's Origin has"
    : "has a path, a query or a fragment, which no browser's Origin has"
  return Either.left(`${ORIGINS_RULE}: ${JSON.stringify(origin)} ${why}; write ${url.origin}`)
}

/** `CORS_ORIGINS`: a comma-separated list of origins, or `*`; unset (or empty), CORS is off. */
export const CorsOrigins = variable(
  "CORS_ORIGINS",
  (text) =>
    Either.all(text.split(",").map((origin) => origin.trim()).filter((origin) => origin !== "").map(parseOrigin))
).pipe(
  Config.option,
  Config.map(Option.filter((origins) => origins.length > 0))
)

/** `BACKUP_EVERY`: how often a SQLite server backs itself up (`Database/ScheduledBackups.ts`); unset or `0`, never. */
export const BackupEvery = duration("BACKUP_EVERY").pipe(
  Config.option,
  Config.map(Option.filter((every) => Duration.toMillis(every) > 0))
)
