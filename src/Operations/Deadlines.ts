/**
 * `REQUEST_TIMEOUT` (default 15 seconds) bounds every request: past it the answer is 503 `unavailable`. The database
 * gives up first, so that a request waiting for it fails with the database's own reason: one operation waits at most
 * for a connection (`DB_CONNECT_TIMEOUT`), its statement (`DB_QUERY_TIMEOUT`) and the client's second of grace for a
 * silent server (`query_timeout`, see `Sql.ts`). Bun's idle timeout, which also counts while a request is answered, is
 * set past the deadline so that it never cuts a request in flight.
 */
import { Config, ConfigError, Duration, Either } from "effect"
import { positiveDuration } from "../Config.js"
import { PostgresTimeoutsConfig } from "../Database/Sql.js"

/** Bun's idle timeout counts whole seconds, up to 255; it is set this much past the request deadline. */
const IDLE_MARGIN_SECONDS = 5
const MAX_IDLE_SECONDS = 255
const MAX_REQUEST_TIMEOUT = Duration.seconds(MAX_IDLE_SECONDS - IDLE_MARGIN_SECONDS)

/** How long a request may take unless `REQUEST_TIMEOUT` says otherwise. */
export const DEFAULT_REQUEST_TIMEOUT = Duration.seconds(15)

/** `REQUEST_TIMEOUT`, checked against the database's timeouts (the database gives up first) and Bun's bound. */
export const RequestTimeoutConfig: Config.Config<Duration.Duration> = Config.all({
  request: positiveDuration("REQUEST_TIMEOUT").pipe(Config.withDefault(DEFAULT_REQUEST_TIMEOUT)),
  database: PostgresTimeoutsConfig
}).pipe(Config.mapOrFail(({ database, request }) => {
  const bound = Duration.sum(Duration.sum(database.connect, database.query), Duration.seconds(1))
  const must = !Duration.greaterThan(request, bound)
    ? `must be longer than DB_CONNECT_TIMEOUT + DB_QUERY_TIMEOUT + 1 second (${Duration.format(bound)}), ` +
      `so that the database gives up before the request does`
    : Duration.greaterThan(request, MAX_REQUEST_TIMEOUT)
    ? `must be at most ${Duration.format(MAX_REQUEST_TIMEOUT)}`
    : undefined
  return must === undefined
    ? Either.right(request)
    : Either.left(
      ConfigError.InvalidData(["REQUEST_TIMEOUT"], `REQUEST_TIMEOUT ${must} (got ${Duration.format(request)})`)
    )
}))

/** Bun's `idleTimeout` (seconds) for a request deadline: past the deadline, so that a request is answered first. */
export const idleTimeoutSeconds = (requestTimeout: Duration.Duration): number =>
  Math.min(MAX_IDLE_SECONDS, Math.ceil(Duration.toSeconds(requestTimeout)) + IDLE_MARGIN_SECONDS)
