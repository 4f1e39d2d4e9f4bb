/**
 * What a failed store means to a client: a 503 `unavailable` with `Retry-After`; the cause goes to the log, never to
 * the client. Kept out of `Domain/`, which a client imports without `@effect/sql`.
 */
import type { SqlError } from "@effect/sql"
import { Effect } from "effect"
import { type Unavailable, unavailable } from "./Domain/Errors.js"
import { addResponseHeaders } from "./ResponseHeaders.js"

/** The headers of every 503 answer: retry in a second. */
export const UNAVAILABLE_HEADERS: Readonly<Record<string, string>> = { "retry-after": "1" }

export const answerUnavailable = (message: string, cause: unknown) =>
  Effect.logError(message, cause).pipe(
    Effect.zipRight(addResponseHeaders(UNAVAILABLE_HEADERS)),
    Effect.zipRight(Effect.fail(unavailable()))
  )

const isSqlError = (error: unknown): error is SqlError.SqlError =>
  (error as { readonly _tag?: unknown })._tag === "SqlError"

/** A failure as the client sees it: a database that does not answer is a 503, any other failure stays itself. */
export const orUnavailableError = <E>(
  error: E | SqlError.SqlError
): Effect.Effect<never, Exclude<E, SqlError.SqlError> | Unavailable> =>
  isSqlError(error) ? answerUnavailable("database failure", error) : Effect.fail(error as Exclude<E, SqlError.SqlError>)

/** A database that does not answer is a 503 for the client. */
export const orUnavailable = <A, E, R>(
  effect: Effect.Effect<A, E | SqlError.SqlError, R>
): Effect.Effect<A, Exclude<E, SqlError.SqlError> | Unavailable, R> =>
  Effect.catchIf(effect, isSqlError, (error) => answerUnavailable("database failure", error))
