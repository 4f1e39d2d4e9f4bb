/**
 * The whole application in-process, as production serves it (the `WebHandler` that Bun serves: the same middleware,
 * routes and handlers) on a fresh database of the given backend, reached through that handler: raw `fetch` for headers
 * and hostile bodies, and the typed `HttpApiClient` derived from `Api` for everything a well-behaved client does.
 */
import {
  FetchHttpClient,
  type HttpApi,
  HttpApiClient,
  type HttpApiGroup,
  HttpClient,
  HttpClientRequest
} from "@effect/platform"
import type { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { Api, type Servers } from "../../src/Api.js"
import { ApiKeys } from "../../src/Auth/ApiKeys.js"
import * as Sql from "../../src/Database/Sql.js"
import { WebHandlerLive } from "../../src/Http.js"
import { Lifecycle } from "../../src/Operations/Lifecycle.js"
import { WebHandler } from "../../src/Serving/WebHandler.js"
import type { Backend } from "./backends.js"

export const ORIGIN = "http://petstore.test"
export const servers: Servers = {
  production: "https://api.example.test/v1",
  staging: "https://staging.example.test/v1"
}

export type Fetch = (path: string, init?: RequestInit) => Promise<Response>

/** Provides an `HttpClient` whose requests `fetch` answers (a path below `ORIGIN`). */
export const answeredBy = (fetch: Fetch) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.provide(FetchHttpClient.layer),
    Effect.provideService(
      FetchHttpClient.Fetch,
      ((input: string | URL | Request, init?: RequestInit) =>
        fetch(String(input).slice(ORIGIN.length), init)) as typeof globalThis.fetch
    )
  )

/** The typed client of `api`, answered by `fetch` (a path below `ORIGIN`), the key as bearer token when one is given. */
export const clientFor = <ApiId extends string, Groups extends HttpApiGroup.HttpApiGroup.Any, ApiError, ApiR>(
  api: HttpApi.HttpApi<ApiId, Groups, ApiError, ApiR>,
  fetch: Fetch,
  key?: string
) =>
  HttpApiClient.make(api, {
    baseUrl: `${ORIGIN}/v1`,
    transformClient: key === undefined ? undefined : HttpClient.mapRequest(HttpClientRequest.bearerToken(key))
  }).pipe(answeredBy(fetch))

/** A fresh application on the given database, disposed with the scope. */
export const testServerOn = <E>(
  database: Layer.Layer<SqlClient.SqlClient, E>,
  options: { readonly corsOrigins?: ReadonlyArray<string> } = {}
) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(
      Layer.mergeAll(
        WebHandlerLive({ servers, corsOrigins: Option.fromNullable(options.corsOrigins) }),
        ApiKeys.Default
      ).pipe(
        Layer.provideMerge(Lifecycle.Default),
        Layer.provide(database)
      )
    )
    const handler = Context.get(context, WebHandler)
    const keys = Context.get(context, ApiKeys)
    const created = yield* keys.create("test")
    const key = Redacted.value(created.key)
    const fetch: Fetch = async (path, init) => handler(new Request(`${ORIGIN}${path}`, init))
    const client = yield* clientFor(Api, fetch, key)
    return {
      fetch,
      handler,
      key,
      keys,
      client,
      lifecycle: Context.get(context, Lifecycle),
      clientWith: (other?: string) => clientFor(Api, fetch, other)
    }
  })

/** A fresh application with its own fresh database of the backend, disposed with the scope. */
export const testServer = (backend: Backend) =>
  Effect.flatMap(backend.freshDatabase, (url) => testServerOn(Sql.layer(url)))

/** A fresh application with its own in-memory SQLite database, disposed with the scope. */
export const makeTestServer = testServerOn(Sql.SqlTest)

export type Server = Effect.Effect.Success<typeof makeTestServer>

/** JSON body and the key's authorization, for raw requests. */
export const authorized = (key: string, init: RequestInit = {}): RequestInit => ({
  ...init,
  headers: {
    authorization: `Bearer ${key}`,
    ...(init.body !== undefined ? { "content-type": "application/json" } : {}),
    ...init.headers
  }
})
