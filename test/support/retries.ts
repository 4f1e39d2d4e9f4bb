/**
 * The application as production serves it (or the library's reference server on the same declaration) on a fresh
 * database of the backend, with the given environment (`RATE_LIMIT`, `IDEMPOTENCY_TTL`, …), a few API keys, and the SQL client
 * to look into the database.
 */
import { SqlClient } from "@effect/sql"
import { ConfigProvider, Context, Effect, Layer, Option, Redacted } from "effect"
import { ApiKeys } from "../../src/Auth/ApiKeys.js"
import * as Sql from "../../src/Database/Sql.js"
import { RoutesLive } from "../../src/Http.js"
import { Lifecycle } from "../../src/Operations/Lifecycle.js"
import { PetsFeed } from "../../src/Pets/Feed.js"
import { PetsRepo } from "../../src/Pets/Repo.js"
import { WebHandler, webHandlerFrom } from "../../src/Serving/WebHandler.js"
import type { Backend } from "./backends.js"
import { ORIGIN, servers } from "./http.js"
import { PetstoreReference, referenceServer } from "./reference.js"

/** The application on the database at `url` (several may share one: replicas). */
export const appOn = (url: Redacted.Redacted<string>, env: Record<string, string> = {}, options: ServeOptions = {}) =>
  appOnDatabase(Sql.layer(url), env, options)

export interface ServeOptions {
  /** `true`: the requests go to the library's own server on the same declaration (`reference.ts`), to compare. */
  readonly reference?: boolean
}

/** The application on the given SQL client. */
export const appOnDatabase = <E>(
  database: Layer.Layer<SqlClient.SqlClient, E>,
  env: Record<string, string> = {},
  options: ServeOptions = {}
) =>
  Effect.gen(function*() {
    const handler = webHandlerFrom(RoutesLive(servers).pipe(Layer.provide([PetsRepo.Default, ApiKeys.Default])), {
      corsOrigins: Option.none()
    })
    const config = Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))
    const context = yield* Layer.build(
      // The feed the handlers follow (one instance: layers are built once per build), for tests that join it.
      Layer.mergeAll(handler, ApiKeys.Default, PetsRepo.Default, PetsFeed.Default).pipe(
        Layer.provideMerge(Lifecycle.Default),
        Layer.provideMerge(database),
        Layer.provide(config)
      )
    )
    const web = options.reference === true
      ? yield* referenceServer(
        PetstoreReference.pipe(Layer.provide(Layer.succeedContext(context)), Layer.provide(config))
      )
      : Context.get(context, WebHandler)
    const keys = Context.get(context, ApiKeys)
    const newKey = (name: string) => Effect.map(keys.create(name), (created) => Redacted.value(created.key))
    const fetch = (path: string, init?: RequestInit) =>
      Effect.promise(() => Promise.resolve(web(new Request(`${ORIGIN}${path}`, init))))
    return { fetch, key: yield* newKey("first"), newKey, sql: Context.get(context, SqlClient.SqlClient), context }
  })

/** The application on a fresh database of the backend. */
export const appWith = (backend: Backend, env: Record<string, string> = {}, options: ServeOptions = {}) =>
  Effect.flatMap(backend.freshDatabase, (url) => Effect.map(appOn(url, env, options), (app) => ({ ...app, url })))

export type App = Effect.Effect.Success<ReturnType<typeof appOn>>

/** A createPet request with this API key, body and (unless undefined) Idempotency-Key header value. */
export const createRequest = (apiKey: string, body: unknown, idempotencyKey?: string): RequestInit => ({
  method: "POST",
  headers: {
    authorization: `Bearer ${apiKey}`,
    "content-type": "application/json",
    ...(idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey })
  },
  body: typeof body === "string" ? body : JSON.stringify(body)
})

export const json = (response: Response) => Effect.promise(() => response.json() as Promise<any>)

export const countPets = (app: App) =>
  Effect.map(app.sql<{ readonly n: number | string }>`SELECT COUNT(*) AS n FROM pets`, (rows) => Number(rows[0].n))
