/**
 * What a database failure means to a client: a 503 `unavailable`, with `Retry-After`. The cause goes to the log, never
 * to the client. Kept out of `Domain/`, which a client imports without `@effect/sql`.
 */
import type { SqlError } from "@effect/sql"
import { Effect } from "effect"
import { unavailable } from "./Domain/Errors.js"
import { addResponseHeaders } from "./ResponseHeaders.js"

/** When a client may try again after a 503 (seconds): a busy or unreachable database is usually back within that. */
export const RETRY_AFTER_SECONDS = 1

/** The headers of every 503 answer. */
export const RETRY_AFTER_HEADERS: Readonly<Record<string, string>> = { "retry-after": String(RETRY_AFTER_SECONDS) }

/** A database that does not answer is a 503 for the client; the cause goes to the log. */
export const orUnavailable = <A, R>(effect: Effect.Effect<A, SqlError.SqlError, R>) =>
  Effect.catchTag(
    effect,
    "SqlError",
    (error) =>
      Effect.logError("database failure", error).pipe(
        Effect.zipRight(addResponseHeaders(RETRY_AFTER_HEADERS)),
        Effect.zipRight(Effect.fail(unavailable()))
      )
  )
