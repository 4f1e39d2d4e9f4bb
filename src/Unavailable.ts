/**
 * What a database failure means to a client: a 503 `unavailable`. The cause goes to the log, never to the client.
 * Kept out of `Domain/`, which a client imports without `@effect/sql`.
 */
import type { SqlError } from "@effect/sql"
import { Effect } from "effect"
import { unavailable } from "./Domain/Errors.js"

/** A database that does not answer is a 503 for the client; the cause goes to the log. */
export const orUnavailable = <A, R>(effect: Effect.Effect<A, SqlError.SqlError, R>) =>
  Effect.catchTag(
    effect,
    "SqlError",
    (error) => Effect.zipRight(Effect.logError("database failure", error), Effect.fail(unavailable()))
  )

