/**
 * Running the service: the HTTP server on a database, with the logger, traces and metrics as configured.
 * `petstore serve` (the command line's) and a bare start (`main.ts`) both come here.
 */
import { Config, ConfigError, Deferred, Effect, Layer, Option, type Redacted } from "effect"
import pkg from "../package.json" with { type: "json" }
import {
  BackupEvery,
  CorsOrigins,
  flagOr,
  Host,
  isWildcardHost,
  Port,
  ServersConfig,
  ShutdownDelay,
  ShutdownTimeout
} from "./Config.js"
import * as Sql from "./Database/Sql.js"
import { WebHandlerLive } from "./Http.js"
import { MetricsAddress } from "./Observability/Config.js"
import { ObservabilityLive } from "./Observability/Live.js"
import { RequestTimeoutConfig } from "./Operations/Deadlines.js"
import { Lifecycle } from "./Operations/Lifecycle.js"
import { ListenerLive } from "./Operations/Listener.js"
import { LoggingLive } from "./Operations/Logging.js"
import { RateLimitPruningLive } from "./RateLimit/Pruning.js"

export const VERSION: string = pkg.version

/**
 * The metrics have a listener of their own: `METRICS_ADDRESS` on the API's address (the same port, on the same or a
 * wildcard host) is refused, naming both settings.
 */
export const metricsApartFrom = (host: string, port: number) =>
  Effect.flatMap(MetricsAddress, (address) =>
    Option.isSome(address) && address.value.port === port &&
      (address.value.hostname === host || isWildcardHost(host) || isWildcardHost(address.value.hostname))
      ? Effect.fail(ConfigError.InvalidData(
        ["METRICS_ADDRESS"],
        `METRICS_ADDRESS ${address.value.hostname}:${port} is on the API's address (HOST ${host}, PORT ${port}): the ` +
          `metrics are served on a listener of their own; give METRICS_ADDRESS another port, such as 127.0.0.1:9464.`
      ))
      : Effect.void)

/**
 * The scheduled backups' layer, checked before the server starts (a database they cannot back up stops it): nothing
 * when `BACKUP_EVERY` is off, and then their module is not even loaded.
 */
const scheduledBackups = (database: Redacted.Redacted<string>) =>
  Effect.flatMap(BackupEvery, (every) =>
    Option.isNone(every) ? Effect.succeed(Layer.empty) : Effect.flatMap(
      Effect.promise(() => import("./Database/ScheduledBackups.js")),
      ({ BackupScheduleConfig, ScheduledBackupsLive }) =>
        Effect.map(BackupScheduleConfig(database), ScheduledBackupsLive)
    ))

/** The flags of `serve`, each overriding its variable: `HOST`, `PORT`, `DATABASE_URL`. */
export interface ServeFlags {
  readonly host: Option.Option<string>
  readonly port: Option.Option<number>
  readonly database: Option.Option<Redacted.Redacted<string>>
}

/**
 * Serves until interrupted (SIGTERM/SIGINT), then drains and closes. Effect's tracer is off (its spans cost more than
 * the steps they time) unless an OTLP endpoint is configured (`ObservabilityLive` turns it on, below the server, so its
 * exporter flushes after the drain).
 */
export const serve = (flags: ServeFlags) =>
  Effect.flatMap(
    Config.all({
      host: flagOr(flags.host, Host),
      port: flagOr(flags.port, Port),
      database: flagOr(flags.database, Sql.DatabaseUrl)
    }),
    (options) =>
      Effect.gen(function*() {
        yield* metricsApartFrom(options.host, options.port)
        const backups = yield* scheduledBackups(options.database)
        const settings = {
          ...options,
          servers: yield* ServersConfig,
          corsOrigins: yield* CorsOrigins,
          shutdownTimeout: yield* ShutdownTimeout,
          shutdownDelay: yield* ShutdownDelay,
          requestTimeout: yield* RequestTimeoutConfig,
          describe: { version: VERSION, database: Sql.describeDatabase(options.database) }
        }
        // Once listening, the service has started: a SQLite file this start created stays (`Sql.servedLayer`).
        const listening = yield* Deferred.make<void>()
        return yield* Layer.launch(
          ListenerLive(settings).pipe(
            Layer.tap(() => Deferred.succeed(listening, undefined)),
            Layer.provide(WebHandlerLive(settings)),
            Layer.provide(Lifecycle.Default),
            // Pruned and backed up below the listener: both stop once the drain is over, with the database still open.
            Layer.provideMerge(RateLimitPruningLive),
            Layer.provideMerge(backups),
            Layer.provide(Sql.servedLayer(options.database, Deferred.isDone(listening))),
            Layer.provide(ObservabilityLive(VERSION))
          )
        ).pipe(Effect.withTracerEnabled(false))
      }).pipe(Effect.provide(LoggingLive("stdout")))
  )

/** The service, configured by the environment alone. */
export const serveFromEnvironment = serve({ host: Option.none(), port: Option.none(), database: Option.none() })
