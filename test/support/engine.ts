/**
 * The engine on a test's own registered groups, as the tests that compare it with the library's server
 * (`reference.ts`) build it: the registrations' layer given, CORS off unless said, disposed with the scope.
 */
import { Context, Effect, Layer, Option } from "effect"
import type { RegisteredGroups } from "../../src/Serving/Registration.js"
import { WebHandler, webHandlerFrom, type WebHandlerOptions } from "../../src/Serving/WebHandler.js"

export const engineServer = <E>(
  groups: Layer.Layer<RegisteredGroups, E>,
  options: Partial<WebHandlerOptions> = {}
) =>
  Effect.map(
    Layer.build(webHandlerFrom(groups, { corsOrigins: Option.none(), ...options })),
    (context) => Context.get(context, WebHandler)
  )
