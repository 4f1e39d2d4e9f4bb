/**
 * Observability in the tests: the repositories on a database with observability configured by a given environment.
 */
import { ConfigProvider, Effect, Layer, Option, type Redacted } from "effect"
import { ApiKeys } from "../../src/Auth/ApiKeys.js"
import * as Sql from "../../src/Database/Sql.js"
import { Observability } from "../../src/Observability/Hooks.js"
import { ObservabilityLive } from "../../src/Observability/Live.js"
import { PetsRepo } from "../../src/Pets/Repo.js"

/** Runs with this environment as the configuration. */
export const withEnvironment = (env: Record<string, string>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

/** The repositories on a database, with observability as the environment configures it (version 9.9.9). */
export const repositoriesOn = (url: Redacted.Redacted<string>) =>
  Layer.mergeAll(PetsRepo.Default, ApiKeys.Default).pipe(
    Layer.provide(Sql.layer(url)),
    Layer.provideMerge(ObservabilityLive("9.9.9"))
  )

/** The hooks, which the tests' environment always configures. */
export const configuredHooks = Effect.map(Effect.serviceOption(Observability), Option.getOrThrow)

/** A loopback port nothing listens on (just now). */
export const freePort = Effect.sync(() => {
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response() })
  const port = server.port!
  server.stop(true)
  return port
})
