/**
 * What a database failure means to a client: a 503 `unavailable` with `Retry-After`. The cause goes to the log, never
 * to the client. Kept out of `Domain/`, which a client imports without `@effect/sql`.
 */
import type { SqlError } from "@effect/sql"
import { Effect } from "effect"
import { unavailable } from "./Domain/Errors.js"
import { addResponseHeaders } from "./ResponseHeaders.js"

/** Seconds a 503 asks the client to wait before retrying (`Retry-After`). */
export const RETRY_AFTER_UNAVAILABLE_SECONDS = 1

/** The headers of every 503 answer. */
export const UNAVAILABLE_HEADERS: Readonly<Record<string, string>> = {
  "retry-after": String(RETRY_AFTER_UNAVAILABLE_SECONDS)
}

/** A store the request needs did not answer: the cause goes to the log, the client gets a 503 with `Retry-After`. */
export const answerUnavailable = (message: string, cause: unknown) =>
  Effect.logError(message, cause).pipe(
    Effect.zipRight(addResponseHeaders(UNAVAILABLE_HEADERS)),
    Effect.zipRight(Effect.fail(unavailable()))
  )

/** A database that does not answer is a 503 for the client; the cause goes to the log. */
export const orUnavailable = <A, E, R>(effect: Effect.Effect<A, E | SqlError.SqlError, R>) =>
  Effect.catchIf(
    effect,
    (error): error is SqlError.SqlError => (error as { readonly _tag?: unknown })._tag === "SqlError",
    (error) => answerUnavailable("database failure", error)
  ) as Effect.Effect<A, Exclude<E, SqlError.SqlError> | ReturnType<typeof unavailable>, R>
