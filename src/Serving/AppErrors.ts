/**
 * What fails inside the server's own routes (`/readyz`, `/docs`, …), answered the pipeline's way: a logged 500 with
 * the `Error` body, its whole cause in the log. An interruption is left to the platform (the client went away, or the
 * deadline passed: `App.ts`).
 */
import type { HttpApp } from "@effect/platform"
import { Cause, Effect } from "effect"
import * as Refusals from "./Refusals.js"

export const appErrors = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<never, R> =>
  Effect.catchAllCause(app, (cause) =>
    Cause.isInterruptedOnly(cause)
      ? Effect.failCause(cause as Cause.Cause<never>)
      : Effect.as(Refusals.logUnexpected(cause), Refusals.refusalResponse(Refusals.internalError)))
