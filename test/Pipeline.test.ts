/**
 * The engine against the library's own server on the same declaration and registration (`support/reference.ts`): the
 * same requests, on the same database, get the same status, and where `HttpApiBuilder` defines the answer (a success,
 * a declared error) the same body and the same headers from handlers and middleware.
 */
import type { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, HashMap, Layer, Logger, LogLevel, Option, Redacted } from "effect"
import { ApiKeys } from "../src/Auth/ApiKeys.js"
import * as Sql from "../src/Database/Sql.js"
import { RoutesLive } from "../src/Http.js"
import { Lifecycle } from "../src/Operations/Lifecycle.js"
import { PetsRepo } from "../src/Pets/Repo.js"
import { WebHandler, webHandlerFrom } from "../src/Serving/WebHandler.js"
import { describeBackends, SQLite } from "./support/backends.js"
import { ORIGIN, servers } from "./support/http.js"
import { Outage, OutageSqlLive } from "./support/outage.js"
import { comparable, PetstoreReference, referenceServer, SERVER_REFUSALS } from "./support/reference.js"

const handlerOf = () =>
  webHandlerFrom(RoutesLive(servers).pipe(Layer.provide([PetsRepo.Default, ApiKeys.Default])), {
    corsOrigins: Option.none()
  })

/** The library's server on the same database. */
const referenceOn = (database: Layer.Layer<SqlClient.SqlClient>) =>
  referenceServer(
    PetstoreReference.pipe(Layer.provide([PetsRepo.Default, ApiKeys.Default]), Layer.provide(database))
  )

/** Status, body and headers, but the request id, the date and the length (Bun sets it on the wire either way). */
const answer = async (response: Response) => {
  const ignored = new Set(["x-request-id", "date", "content-length"])
  const headers = Object.fromEntries([...response.headers].filter(([name]) => !ignored.has(name)))
  return { status: response.status, headers, body: await response.text() }
}

/** The key's `Authorization` header, and a POST of a body, a JSON one with the key unless other headers are given. */
const requestsWith = (key: string) => {
  const auth = { authorization: `Bearer ${key}` }
  const json = { ...auth, "content-type": "application/json" }
  const post = (body: string, headers: Record<string, string> = json): RequestInit => ({
    method: "POST",
    headers,
    body
  })
  return { auth, post }
}

/** Requests of every kind: successes, each way to fail, unknown paths and methods, limits. */
const casesFor = (key: string, revokedKey: string): ReadonlyArray<readonly [string, RequestInit?]> => {
  const { auth, post } = requestsWith(key)
  return [
    ["/v1/pets", { headers: auth }],
    ["/v1/pets?limit=2", { headers: auth }],
    ["/v1/pets?limit=2&status=sold&after=2", { headers: auth }],
    ["/v1/pets?status=pending", { headers: auth }],
    ["/v1/pets?limit=0", { headers: auth }],
    ["/v1/pets?limit=2&limit=3", { headers: auth }],
    ["/v1/pets?status=lost", { headers: auth }],
    ["/v1/pets?after=-1", { headers: auth }],
    ["/v1/pets?unknown=1", { headers: auth }],
    // Names an object's prototype has: parameters like any other.
    ["/v1/pets?constructor=1&__proto__=2&toString=3", { headers: auth }],
    ["/v1/pets?constructor=1&constructor=2&limit=2", { headers: auth }],
    ["/v1/pets/1", { headers: auth }],
    ["/v1/pets/999", { headers: auth }],
    ["/v1/pets/abc", { headers: auth }],
    ["/v1/pets/01", { headers: auth }],
    ["/v1/pets/"],
    ["/v1/pets"],
    ["/v1/pets/1"],
    ["/v1/pets", { headers: { authorization: "Basic abc" } }],
    ["/v1/pets", { headers: { authorization: `bearer ${key}` } }],
    ["/v1/pets", { headers: { authorization: `Bearer ${revokedKey}` } }],
    ["/v1/pets/1", { headers: { authorization: "Bearer psk_000000000000_" + "A".repeat(43) } }],
    ["/v1/pets", { headers: { ...auth, "x-request-id": "client-id-1" } }],
    ["/v1/pets", post("{\"name\":\"\",\"categoryId\":1}")],
    ["/v1/pets", post("{\"name\":\"x\",\"categoryId\":0}")],
    ["/v1/pets", post("{\"name\":\"x\",\"categoryId\":1,\"status\":\"lost\"}")],
    ["/v1/pets", post("{\"name\":\"x\"")],
    ["/v1/pets", post("[]")],
    ["/v1/pets", post("{\"name\":\"x\",\"categoryId\":1}", { ...auth, "content-type": "text/plain" })],
    ["/v1/pets", post("{\"name\":\"x\",\"categoryId\":1}", { "content-type": "application/json" })],
    ["/v1/pets", post("x".repeat(70_000))],
    ["/v1/pets", { method: "PUT", headers: auth }],
    ["/v1/pets/1", { method: "DELETE", headers: auth }],
    ["/v1/pets", { method: "HEAD", headers: auth }],
    ["/v2/pets", { headers: auth }],
    ["/healthz"],
    ["/v1/pets?" + "a".repeat(9000), { headers: auth }],
    ["/v1/pets/%31", { headers: auth }],
    ["/v1/pets/1/", { headers: auth }],
    ["/v1/pets//1", { headers: auth }],
    ["/V1/pets", { headers: auth }],
    ["/v1/pets/1?x=1", { headers: auth }],
    ["/v1/pets/changes?after=start&limit=2", { headers: auth }],
    ["/v1/pets/changes?after=start&status=sold&limit=1", { headers: auth }],
    ["/v1/pets/changes?after=nowhere.1", { headers: auth }],
    ["/v1/pets/changes?wait=0", { headers: auth }],
    ["/v1/pets/changes?wait=26", { headers: auth }],
    ["/v1/pets/changes"],
    ["/v1/pets", { method: "OPTIONS", headers: auth }],
    ["/v1/pets/1", { method: "PATCH", headers: auth }]
  ]
}

describeBackends((backend) => {
  describe("pipeline", () => {
    it.scoped("answers as the library's server does", () =>
      Effect.gen(function*() {
        // One database; each app built on its own (a build shares its router between the layers it builds).
        const database = Layer.succeedContext(yield* Layer.build(Sql.layer(yield* backend.freshDatabase)))
        const direct = yield* Effect.map(
          Layer.build(handlerOf().pipe(Layer.provide(Lifecycle.Default), Layer.provide(database))),
          (context) => Context.get(context, WebHandler)
        )
        const reference = yield* referenceOn(database)
        const keys = Context.get(yield* Layer.build(ApiKeys.Default.pipe(Layer.provide(database))), ApiKeys)
        const key = Redacted.value((yield* keys.create("dispatch")).key)
        const revoked = yield* keys.create("revoked")
        yield* keys.revoke(revoked.id)
        const { post } = requestsWith(key)

        // Creation first, through each server in turn: the ids differ, the rest must not.
        for (let i = 1; i <= 6; i++) {
          const body = JSON.stringify({
            name: `  pet ${i} `,
            categoryId: i,
            ...(i % 2 === 0 ? { status: "sold" } : {})
          })
          const a = yield* Effect.promise(async () =>
            comparable(await direct(new Request(`${ORIGIN}/v1/pets`, post(body))))
          )
          const b = yield* Effect.promise(async () =>
            comparable(await reference(new Request(`${ORIGIN}/v1/pets`, post(body))))
          )
          expect(a.status).toBe(201)
          const [pa, pb] = [JSON.parse(a.body), JSON.parse(b.body)]
          expect(pb.id).toBe(pa.id + 1)
          expect({ ...pa, id: 0 }).toEqual({ ...pb, id: 0 })
          expect(a.headers.location).toBe(`/v1/pets/${pa.id}`)
          expect({ ...a.headers, location: "" }).toEqual({ ...b.headers, location: "" })
        }

        const cases = casesFor(key, Redacted.value(revoked.key))
        let compared = 0
        for (const [path, init] of cases) {
          const a = yield* Effect.promise(async () => comparable(await direct(new Request(`${ORIGIN}${path}`, init))))
          const code = a.status >= 400 ? JSON.parse(a.body).code : undefined
          if (SERVER_REFUSALS.has(code) || path.startsWith("/healthz")) continue
          const b = yield* Effect.promise(async () =>
            comparable(await reference(new Request(`${ORIGIN}${path}`, init)))
          )
          const name = `${init?.method ?? "GET"} ${path.slice(0, 80)}`
          compared++
          // A failed decode: the same status; its body is the interface's `Error`, not the library's.
          if (a.status === 400) expect({ name, status: b.status }).toEqual({ name, status: 400 })
          else expect({ name, ...a }).toEqual({ name, ...b })
        }
        expect(compared).toBeGreaterThan(20)
      }))
  })
})

describe("pipeline, answers at once", () => {
  it.scoped("on SQLite a read is answered in the call that brought it (its fiber finishes at once), a 404 too", () =>
    Effect.gen(function*() {
      const database = yield* SQLite.freshDatabase
      const context = yield* Layer.build(
        Layer.mergeAll(handlerOf(), ApiKeys.Default).pipe(
          Layer.provide(Lifecycle.Default),
          Layer.provide(Sql.layer(database))
        )
      ).pipe(Logger.withMinimumLogLevel(LogLevel.Warning))
      const handler = Context.get(context, WebHandler)
      const key = Redacted.value((yield* Context.get(context, ApiKeys).create("at once")).key)
      const auth = { authorization: `Bearer ${key}` }
      const create = () =>
        handler(
          new Request(`${ORIGIN}/v1/pets`, {
            method: "POST",
            headers: { ...auth, "content-type": "application/json" },
            body: JSON.stringify({ name: "Rex", categoryId: 1 })
          })
        )
      // The key's first check reads it from the database, in the request's fiber; the creates wait for their commit.
      for (let i = 0; i < 3; i++) expect((yield* Effect.promise(async () => create())).status).toBe(201)
      const got = handler(new Request(`${ORIGIN}/v1/pets/2`, { headers: auth }))
      const page = handler(new Request(`${ORIGIN}/v1/pets?limit=2`, { headers: auth }))
      const absent = handler(new Request(`${ORIGIN}/v1/pets/999`, { headers: auth }))
      expect((absent as Response).status).toBe(404)
      expect(got).toBeInstanceOf(Response)
      expect(page).toBeInstanceOf(Response)
      const [one, two] = [got as Response, page as Response]
      expect({ status: one.status, body: yield* Effect.promise(() => one.json()) }).toEqual({
        status: 200,
        body: { id: 2, name: "Rex", categoryId: 1, status: "available" }
      })
      expect(one.headers.get("deprecation")).not.toBeNull()
      expect(two.headers.get("link")).toBe("</v1/pets?limit=2&after=2>; rel=\"next\"")
      expect((yield* Effect.promise(() => two.json())) as ReadonlyArray<unknown>).toHaveLength(2)
    }))
})

describe("pipeline, logs", () => {
  /** A failing repository; `wait` makes it log a line and fail only after waiting for a timer (the fiber suspends). */
  const failingRepo = (wait: boolean) => {
    const fail = () =>
      wait
        ? Effect.promise(() => new Promise((done) => setTimeout(done, 5))).pipe(
          Effect.zipRight(Effect.logWarning("after a wait")),
          Effect.zipRight(Effect.die(new Error("boom")))
        )
        : Effect.die(new Error("boom"))
    return Layer.succeed(
      PetsRepo,
      PetsRepo.make({
        create: fail,
        createOnce: fail,
        releaseExpired: fail,
        findById: fail,
        list: fail
      })
    )
  }

  for (const wait of [false, true]) {
    const title = `every line a request logs carries its request id, an unexpected failure's included${
      wait ? ", also after the request waited" : ""
    }`
    it.scoped(title, () =>
      Effect.gen(function*() {
        const lines: Array<{ message: unknown; requestId: unknown }> = []
        const capture = Logger.make(({ annotations, message }) => {
          lines.push({
            message: Array.isArray(message) ? message[0] : message,
            requestId: Option.getOrUndefined(HashMap.get(annotations, "requestId"))
          })
        })
        const database = Layer.succeedContext(yield* Layer.build(Sql.SqlTest))
        const context = yield* Layer.build(
          Layer.mergeAll(
            webHandlerFrom(RoutesLive(servers).pipe(Layer.provide([failingRepo(wait), ApiKeys.Default])), {
              corsOrigins: Option.none()
            }),
            ApiKeys.Default
          ).pipe(
            Layer.provide([Lifecycle.Default, Logger.replace(Logger.defaultLogger, capture)]),
            Layer.provide(database)
          )
        )
        const key = Redacted.value((yield* Context.get(context, ApiKeys).create("logs")).key)
        const handler = Context.get(context, WebHandler)
        const response = yield* Effect.promise(async () =>
          handler(
            new Request(`${ORIGIN}/v1/pets/1`, {
              headers: { authorization: `Bearer ${key}`, "x-request-id": "req-42" }
            })
          )
        )
        expect(response.status).toBe(500)
        expect(lines.filter((line) => line.requestId === "req-42").map((line) => line.message)).toEqual([
          ...(wait ? ["after a wait"] : []),
          "unexpected failure",
          "request"
        ])
        expect(lines.filter((line) => line.message !== "database failure").every((line) => line.requestId === "req-42"))
          .toBe(true)
      }))
  }
})

describe("pipeline, Bun's routing", () => {
  it.scoped("Bun.serve with the server's routes answers as the server does in-process", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(
        Layer.mergeAll(handlerOf(), ApiKeys.Default).pipe(
          Layer.provide(Lifecycle.Default),
          Layer.provide(Sql.SqlTest)
        )
      )
      const keys = Context.get(context, ApiKeys)
      const key = Redacted.value((yield* keys.create("routing")).key)
      const revoked = yield* keys.create("revoked")
      yield* keys.revoke(revoked.id)
      const dispatcher = Context.get(context, WebHandler)
      // Data to answer with: the lists and gets below return pets, not empty pages.
      for (let i = 1; i <= 3; i++) {
        const created = yield* Effect.promise(async () =>
          dispatcher(
            new Request(`${ORIGIN}/v1/pets`, {
              method: "POST",
              headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
              body: JSON.stringify({ name: `pet ${i}`, categoryId: i, status: i === 2 ? "sold" : "available" })
            })
          )
        )
        expect(created.status).toBe(201)
      }
      // Every path of the one route table, with and without its trailing slash.
      expect(Object.keys(dispatcher.routes).filter((path) => !path.endsWith("/")).sort()).toEqual(
        [
          "/docs",
          "/favicon.ico",
          "/healthz",
          "/openapi.json",
          "/readyz",
          "/v1/pets",
          "/v1/pets/:petId",
          "/v1/pets/changes"
        ]
      )
      // What production runs (src/Http.ts), on a loopback port of its own.
      const server = yield* Effect.acquireRelease(
        Effect.sync(() =>
          Bun.serve({
            hostname: "127.0.0.1",
            port: 0,
            routes: dispatcher.routes,
            fetch: dispatcher,
            maxRequestBodySize: Number.MAX_SAFE_INTEGER
          })
        ),
        (server) => Effect.promise(() => server.stop(true))
      )
      const origin = server.url.href.replace(/\/$/, "")
      for (const [path, init] of casesFor(key, Redacted.value(revoked.key))) {
        const viaBun = yield* Effect.promise(async () => answer(await fetch(`${origin}${path}`, init)))
        const inProcess = yield* Effect.promise(async () =>
          answer(await dispatcher(new Request(`${ORIGIN}${path}`, init)))
        )
        if (init?.method === "HEAD") inProcess.body = ""
        expect({ path: path.slice(0, 80), ...viaBun }).toEqual({ path: path.slice(0, 80), ...inProcess })
      }
    }))
})

describe("the answers the pipeline gives itself", () => {
  const requests = (key: string): ReadonlyArray<readonly [string, RequestInit]> => {
    const auth = { authorization: `Bearer ${key}` }
    return [
      ["/v1/pets", { headers: auth }],
      ["/v1/pets/1", { headers: auth }],
      ["/v1/pets", {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: "{\"name\":\"x\",\"categoryId\":1}"
      }]
    ]
  }
  /** The engine and the library's server on one database (or repository), and an API key. */
  const both = (repo: Layer.Layer<PetsRepo, never, never> | undefined, database: Layer.Layer<any>) =>
    Effect.gen(function*() {
      const direct = yield* Effect.map(
        Layer.build(
          webHandlerFrom(RoutesLive(servers).pipe(Layer.provide([repo ?? PetsRepo.Default, ApiKeys.Default])), {
            corsOrigins: Option.none()
          }).pipe(Layer.provide(Lifecycle.Default), Layer.provide(database))
        ),
        (context) => Context.get(context, WebHandler)
      )
      const app = yield* referenceServer(
        PetstoreReference.pipe(Layer.provide([repo ?? PetsRepo.Default, ApiKeys.Default]), Layer.provide(database))
      )
      const keys = Context.get(yield* Layer.build(ApiKeys.Default.pipe(Layer.provide(database))), ApiKeys)
      const key = Redacted.value((yield* keys.create("itself")).key)
      return { direct, app, key }
    })

  it.scoped("503 with the database gone, as the library's server answers it", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(OutageSqlLive)
      const database = Layer.succeedContext(context)
      const { app, direct, key } = yield* both(undefined, database)
      yield* Context.get(context, Outage).set(true)
      for (const [path, init] of requests(key)) {
        // The key was checked a moment ago: it is taken at its word, so the database's absence shows in the operation.
        const a = yield* Effect.promise(async () => comparable(await direct(new Request(`${ORIGIN}${path}`, init))))
        const b = yield* Effect.promise(async () => comparable(await app(new Request(`${ORIGIN}${path}`, init))))
        expect(a.status).toBe(503)
        expect({ path, ...a }).toEqual({ path, ...b })
      }
    }))

  it.scoped("500 from a defect, as the library's server answers it, with the interface's Error body, leaking nothing", () =>
    Effect.gen(function*() {
      const database = Layer.succeedContext(yield* Layer.build(Sql.SqlTest))
      const boom = () => Effect.die(new Error("secret internals"))
      const { app, direct, key } = yield* both(
        Layer.succeed(
          PetsRepo,
          PetsRepo.make({
            create: boom,
            createOnce: boom,
            releaseExpired: boom,
            findById: boom,
            list: boom
          })
        ),
        database
      )
      for (const [path, init] of requests(key)) {
        const a = yield* Effect.promise(async () => comparable(await direct(new Request(`${ORIGIN}${path}`, init))))
        const b = yield* Effect.promise(async () => comparable(await app(new Request(`${ORIGIN}${path}`, init))))
        expect(a.status).toBe(500)
        expect(b.status).toBe(500)
        expect(a.body).not.toContain("secret")
        expect(JSON.parse(a.body)).toEqual({ code: "internal_error", message: expect.any(String), status: 500 })
      }
    }))
})
