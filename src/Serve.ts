/**
 * Running the service: the HTTP server on a database, with the logger and the tracer as configured. `petstore serve`
 * (the command line's) and a bare start (`main.ts`) both come here.
 */
import { Config, Effect, Layer, type Redacted } from "effect"
import pkg from "../package.json" with { type: "json" }
import { CorsOrigins, Host, Port, ServersConfig, ShutdownDelay, ShutdownTimeout, TracingEnabled } from "./Config.js"
import { RequestTimeoutConfig } from "./Deadlines.js"
import { HttpLive } from "./Listener.js"
import { LoggingLive } from "./Logging.js"
import * as Sql from "./Sql.js"

export const VERSION: string = pkg.version

export interface ServeOptions {
  readonly host: string
  readonly port: number
  readonly database: Redacted.Redacted<string>
}

/** Where to listen and which database to use, from the environment alone (what the command-line flags override). */
export const ServeOptionsConfig: Config.Config<ServeOptions> = Config.all({ host: Host, port: Port, database: Sql.DatabaseUrl })

/** Serves until interrupted (SIGTERM/SIGINT), then drains and closes. */
export const serve = (options: ServeOptions) =>
  Effect.gen(function*() {
    const tracing = yield* TracingEnabled
    return yield* Layer.launch(
      HttpLive({
        host: options.host,
        port: options.port,
        servers: yield* ServersConfig,
        corsOrigins: yield* CorsOrigins,
        shutdownTimeout: yield* ShutdownTimeout,
        shutdownDelay: yield* ShutdownDelay,
        requestTimeout: yield* RequestTimeoutConfig,
        describe: { version: VERSION, database: Sql.describeDatabase(options.database) }
      }).pipe(Layer.provide(Sql.layer(options.database)))
    ).pipe(Effect.withTracerEnabled(tracing))
  }).pipe(Effect.provide(LoggingLive("stdout")))

/** The service, configured by the environment alone. */
export const serveFromEnvironment = Effect.flatMap(ServeOptionsConfig, serve)
