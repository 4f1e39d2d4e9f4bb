/**
 * What the pipeline promises beyond answering as the library's server does (test/Pipeline.test.ts): it serves every
 * endpoint of the declaration itself, runs the declaration's middleware so that a handler can read what they provide,
 * ends a request whose client goes away, and answers a body that never arrives.
 */
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, type HttpApiError, HttpApiGroup } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Duration, Effect, Either, FastCheck as fc, Layer, Option, Redacted, Schema } from "effect"
import { Authorization, CurrentApiKey } from "../src/Auth/Api.js"
import { ApiKeys } from "../src/Auth/ApiKeys.js"
import { AuthorizationLive } from "../src/Auth/Http.js"
import * as Sql from "../src/Database/Sql.js"
import { CreatePetHeaders } from "../src/Domain/Idempotency.js"
import { GroupsLive, RoutesLive } from "../src/Http.js"
import { Lifecycle } from "../src/Operations/Lifecycle.js"
import { PetsRepo } from "../src/Pets/Repo.js"
import { deriveRoutes } from "../src/Serving/Derive.js"
import { RegisteredGroups, registerGroup } from "../src/Serving/Registration.js"
import { queryOf } from "../src/Serving/Url.js"
import { WebHandler, webHandlerFrom } from "../src/Serving/WebHandler.js"
import { describeBackends } from "./support/backends.js"
import { ORIGIN, servers } from "./support/http.js"
import { referenceServer } from "./support/reference.js"

describeBackends((backend) => {
  describe("deriving the pipeline", () => {
    it.scoped("serves every endpoint of the declaration: the list of endpoints it cannot serve is empty", () =>
      Effect.gen(function*() {
        const database = Sql.layer(yield* backend.freshDatabase)
        const context = yield* Layer.build(
          GroupsLive.pipe(
            Layer.provide([PetsRepo.Default, ApiKeys.Default, Lifecycle.Default]),
            Layer.provide(database)
          )
        )
        const derived = deriveRoutes(Context.get(context, RegisteredGroups))
        expect(derived.unserved).toEqual([])
        expect(derived.routes.map((route) => `${route.method} ${route.path}`).sort()).toEqual(
          ["GET /v1/pets", "GET /v1/pets/:petId", "GET /v1/pets/changes", "POST /v1/pets"]
        )
      }))
  })
})

/** An API of one endpoint whose handler reads the key that the `Authorization` middleware provides. */
class WhoApi extends HttpApiGroup.make("who", { topLevel: true })
  .add(HttpApiEndpoint.get("whoAmI", "/whoami").addSuccess(Schema.Struct({ keyId: Schema.String })))
  .middleware(Authorization)
{}
const TestApi = HttpApi.make("test").add(WhoApi).prefix("/v1")

const registerWho = (
  handlers: HttpApiBuilder.Handlers.FromGroup<HttpApiError.HttpApiDecodeError, never, typeof WhoApi>
) => handlers.handle("whoAmI", () => Effect.map(CurrentApiKey, (key) => ({ keyId: key.id })))

describe("a handler reading what middleware provide", () => {
  it.scoped("reads CurrentApiKey alike through the engine, the library's server and Bun's routes", () =>
    Effect.gen(function*() {
      const database = Layer.succeedContext(yield* Layer.build(Sql.SqlTest))
      const groups = Layer.scoped(RegisteredGroups, Effect.all([registerGroup(TestApi, "who", registerWho)]))
      const pipeline = yield* Effect.map(
        Layer.build(
          webHandlerFrom(groups.pipe(Layer.provide(AuthorizationLive)), { corsOrigins: Option.none() }).pipe(
            Layer.provide(ApiKeys.Default),
            Layer.provide(database)
          )
        ),
        (context) => Context.get(context, WebHandler)
      )
      const app = yield* referenceServer(
        HttpApiBuilder.api(TestApi).pipe(
          Layer.provide(HttpApiBuilder.group(TestApi, "who", registerWho)),
          Layer.provide(AuthorizationLive),
          Layer.provide(ApiKeys.Default),
          Layer.provide(database)
        )
      )
      const keys = Context.get(yield* Layer.build(ApiKeys.Default.pipe(Layer.provide(database))), ApiKeys)
      const created = yield* keys.create("who")
      const init = { headers: { authorization: `Bearer ${Redacted.value(created.key)}` } }
      const server = yield* Effect.acquireRelease(
        Effect.sync(() => Bun.serve({ hostname: "127.0.0.1", port: 0, routes: pipeline.routes, fetch: pipeline })),
        (server) => Effect.promise(() => server.stop(true))
      )
      const answers = yield* Effect.promise(() =>
        Promise.all([
          Promise.resolve(pipeline(new Request(`${ORIGIN}/v1/whoami`, init))).then((r) => r.json()),
          Promise.resolve(app(new Request(`${ORIGIN}/v1/whoami`, init))).then((r) => r.json()),
          fetch(`${server.url.href}v1/whoami`, init).then((r) => r.json())
        ])
      )
      expect(answers).toEqual([{ keyId: created.id }, { keyId: created.id }, { keyId: created.id }])
    }))
})

describe("requests that end early", () => {
  /** A repository whose list says when it starts, then waits until interrupted, and says so. */
  const waitingRepo = (started: Deferred.Deferred<void>, interrupted: Deferred.Deferred<void>) =>
    Layer.succeed(
      PetsRepo,
      PetsRepo.make({
        create: () => Effect.never,
        createOnce: () => Effect.never,
        releaseExpired: () => Effect.never,
        list: () =>
          Deferred.succeed(started, undefined).pipe(
            Effect.zipRight(Effect.never),
            Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined))
          ),
        findById: () => Effect.never
      })
    )

  /** The application on that repository, and a key: its list requests wait until interrupted. */
  const waitingServer = (options: { readonly requestTimeout?: Duration.Duration }) =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const interrupted = yield* Deferred.make<void>()
      const database = Layer.succeedContext(yield* Layer.build(Sql.SqlTest))
      const context = yield* Layer.build(
        Layer.mergeAll(
          webHandlerFrom(
            RoutesLive(servers).pipe(Layer.provide([waitingRepo(started, interrupted), ApiKeys.Default])),
            { corsOrigins: Option.none(), ...options }
          ),
          ApiKeys.Default
        ).pipe(Layer.provide(Lifecycle.Default), Layer.provide(database))
      )
      const key = Redacted.value((yield* Context.get(context, ApiKeys).create("waiting")).key)
      return { started, interrupted, key, server: Context.get(context, WebHandler) }
    })

  it.live("a client that goes away interrupts the request's fiber", () =>
    Effect.scoped(Effect.gen(function*() {
      const { interrupted, key, server, started } = yield* waitingServer({})
      const controller = new AbortController()
      const answer = server(
        new Request(`${ORIGIN}/v1/pets`, { headers: { authorization: `Bearer ${key}` }, signal: controller.signal })
      )
      expect(answer).toBeInstanceOf(Promise)
      yield* Deferred.await(started)
      controller.abort()
      yield* Deferred.await(interrupted).pipe(Effect.timeout("5 seconds"))
      expect((yield* Effect.promise(async () => answer)).status).toBe(499)
    })))

  it.live("a request past REQUEST_TIMEOUT is interrupted and answered 503 unavailable, with Retry-After", () =>
    Effect.scoped(Effect.gen(function*() {
      const { interrupted, key, server } = yield* waitingServer({ requestTimeout: Duration.millis(300) })
      const response = yield* Effect.promise(async () =>
        server(new Request(`${ORIGIN}/v1/pets`, { headers: { authorization: `Bearer ${key}` } }))
      )
      expect(response.status).toBe(503)
      expect(response.headers.get("retry-after")).toBe("1")
      expect(yield* Effect.promise(() => response.json())).toMatchObject({ code: "unavailable", status: 503 })
      yield* Deferred.await(interrupted).pipe(Effect.timeout("5 seconds"))
    })))

  it.scoped("a body that fails to arrive is answered 400, without an unhandled rejection", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(
        Layer.mergeAll(
          webHandlerFrom(RoutesLive(servers).pipe(Layer.provide([PetsRepo.Default, ApiKeys.Default])), {
            corsOrigins: Option.none()
          }),
          ApiKeys.Default
        ).pipe(Layer.provide(Lifecycle.Default), Layer.provide(Sql.SqlTest))
      )
      const key = Redacted.value((yield* Context.get(context, ApiKeys).create("body")).key)
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode("{\"name\":"))
          controller.error(new Error("connection reset"))
        }
      })
      const response = yield* Effect.promise(async () =>
        Context.get(context, WebHandler)(
          new Request(`${ORIGIN}/v1/pets`, {
            method: "POST",
            headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
            body
          })
        )
      )
      expect(response.status).toBe(400)
      expect(yield* Effect.promise(() => response.json())).toMatchObject({ code: "bad_request", status: 400 })
    }))
})

describe("the query", () => {
  it("is read in one pass: a name repeated thousands of times keeps every value", () => {
    const query = queryOf(`/v1/pets?${"a=1&".repeat(4000)}limit=2`)
    expect(query.a).toHaveLength(4000)
    expect(query.limit).toBe("2")
  })
})

/**
 * Headers declared by name, headers decoded directly (createPet's), and headers as a record of any name (which the
 * pipeline does not read by name).
 */
const NamedHeaders = Schema.Struct({ "x-trace": Schema.optional(Schema.String), "x-tag": Schema.String })
class HeadersApi extends HttpApiGroup.make("headers", { topLevel: true })
  .add(
    HttpApiEndpoint.get("named", "/named")
      .setHeaders(NamedHeaders)
      .addSuccess(Schema.String)
  )
  .add(
    HttpApiEndpoint.get("keyed", "/keyed")
      .setHeaders(CreatePetHeaders)
      .addSuccess(Schema.String)
  )
  .add(
    HttpApiEndpoint.get("any", "/any")
      .setHeaders(Schema.Record({ key: Schema.String, value: Schema.String }))
      .addSuccess(Schema.String)
  )
{}
const HeadersTestApi = HttpApi.make("headers").add(HeadersApi)

describe("the headers", () => {
  const derived = deriveRoutes([
    Effect.runSync(Effect.scoped(
      registerGroup(HeadersTestApi, "headers", (handlers) =>
        handlers
          .handle("named", () => Effect.succeed("ok"))
          .handle("keyed", () => Effect.succeed("ok"))
          .handle("any", () => Effect.succeed("ok")))
    ))
  ])

  it("are read by the names the endpoint declares, as HttpApi reads them from a record of all of them", () => {
    const named = derived.routes.find((route) => route.name === "named")!
    const headers = new Headers([["X-Tag", "a"], ["x-tag", "b"], ["authorization", "Bearer k"]])
    const viaRecord = Schema.decodeUnknownEither(NamedHeaders)(Object.fromEntries(headers))
    expect(named.decodeHeaders!(headers)).toEqual(viaRecord)
    expect(named.decodeHeaders!(headers)).toEqual(Either.right({ "x-tag": "a, b" }))
    expect(named.decodeHeaders!(new Headers())._tag).toBe("Left")
  })

  it("decoded directly (an optional Idempotency-Key) decode as Schema decodes them, refusals included", () => {
    const keyed = derived.routes.find((route) => route.name === "keyed")!
    const bySchema = Schema.decodeUnknownEither(CreatePetHeaders)
    const agree = (value: string | undefined) => {
      const headers = new Headers(value === undefined ? [] : [["Idempotency-Key", value]])
      expect(keyed.decodeHeaders!(headers)).toEqual(bySchema(value === undefined ? {} : { "idempotency-key": value }))
    }
    agree(undefined)
    for (
      const value of [
        "abc",
        "\"abc\"",
        "\"a\\\"b\"",
        " \"abc\";p=1 ",
        "8e03978e-40d5-43e8-bc93-6894a57f9324",
        "",
        "\"\"",
        "\"abc",
        "a b",
        "x".repeat(256),
        "\"abc\";P=1"
      ]
    ) agree(value)
    expect(keyed.decodeHeaders!(new Headers([["Idempotency-Key", "\"abc\""]]))).toEqual(
      Either.right({ "idempotency-key": "abc" })
    )
    expect(keyed.decodeHeaders!(new Headers([["Idempotency-Key", "a b"]]))._tag).toBe("Left")
    // Any value a request can carry (visible ASCII and spaces; Bun trims the ends of a header's value).
    fc.assert(
      fc.property(
        fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)) }),
        (value) => {
          agree(value.trim())
        }
      )
    )
  })

  it("of any name, as a record, are an endpoint the engine does not serve: it is listed, with why (no start)", () => {
    expect(derived.unserved).toEqual([{
      endpoint: "headers.any",
      reason: "its headers are not a struct of named headers"
    }])
  })
})
