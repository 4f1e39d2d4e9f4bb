/**
 * `npm run bench:stages`: what each stage of the request pipeline costs, in CPU microseconds per request, measured
 * in-process on a catalogue of 10 000 pets (no network, so Bun's HTTP work is not in these figures): each stage is run
 * alone many times over, the way the pipeline runs it, and the whole request beside them. CPU time, not wall time, so
 * that other work on the machine disturbs it less; still, compare figures of one run.
 */
import { HttpServerRequest } from "@effect/platform"
import { Context, Duration, Effect, FiberSet, Layer, Logger, LogLevel, Option, Redacted, Runtime } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ApiKeys } from "../src/Auth/ApiKeys.js"
import * as Sql from "../src/Database/Sql.js"
import { RoutesLive } from "../src/Http.js"
import { Lifecycle } from "../src/Operations/Lifecycle.js"
import { PetsRepo } from "../src/Pets/Repo.js"
import { deriveRoutes } from "../src/Serving/Derive.js"
import * as Gate from "../src/Serving/Gate.js"
import { makePipeline } from "../src/Serving/Pipeline.js"
import { RegisteredGroups } from "../src/Serving/Registration.js"
import { makeRouteTable } from "../src/Serving/RouteTable.js"
import { pathOf, queryOf } from "../src/Serving/Url.js"
import { WebHandler, webHandlerFrom } from "../src/Serving/WebHandler.js"
import { insertPets } from "./seed.js"
import { median } from "./stats.js"

const N = Number(process.env.STAGES_N ?? 20_000)
const servers = { production: "https://api.example.test/v1", staging: "https://staging.example.test/v1" }

const cpu = (run: () => unknown): number => {
  for (let i = 0; i < N / 10; i++) run()
  const start = process.cpuUsage()
  for (let i = 0; i < N; i++) run()
  const used = process.cpuUsage(start)
  return Math.round(((used.user + used.system) / N) * 100) / 100
}
/**
 * CPU per request of `run`, each step awaited: `batch` requests at a time, awaited together (creates then share a group
 * commit, as under load), or one.
 */
const cpuAsync = async (run: () => unknown, batch = 1): Promise<number> => {
  const step = batch === 1 ? run : () => Promise.all(Array.from({ length: batch }, run))
  const steps = Math.ceil(N / batch)
  for (let i = 0; i < steps / 10; i++) await step()
  const start = process.cpuUsage()
  for (let i = 0; i < steps; i++) await step()
  const used = process.cpuUsage(start)
  return Math.round(((used.user + used.system) / (steps * batch)) * 100) / 100
}
/** Creates are sent this many at a time. */
const BATCH = 32

const file = join(mkdtempSync(join(tmpdir(), "petstore-stages-")), "stages.db")

const program = Effect.gen(function*() {
  const database = Layer.succeedContext(yield* Layer.build(Sql.layer(Redacted.make(file))))
  insertPets(file, 10_000)
  const routes = RoutesLive(servers).pipe(Layer.provide([PetsRepo.Default, ApiKeys.Default, Lifecycle.Default]))
  const context = yield* Layer.build(
    Layer.mergeAll(routes, webHandlerFrom(routes, { corsOrigins: Option.none() }), ApiKeys.Default).pipe(
      Layer.provide(Lifecycle.Default),
      Layer.provide(database),
      // As the bench runs the server: no request log (its cost is a row of `npm run bench`).
      Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
    )
  )
  const server = Context.get(context, WebHandler)
  const key = Redacted.value((yield* Context.get(context, ApiKeys).create("stages")).key)
  const headers = { authorization: `Bearer ${key}` }
  const derived = deriveRoutes(Context.get(context, RegisteredGroups))
  const getPet = derived.routes.find((route) => route.name === "getPet")!
  const listPets = derived.routes.find((route) => route.name === "listPets")!
  const table = makeRouteTable(
    derived.routes.map((route) => ({ method: route.method, path: route.path, target: route }))
  )
  const pets = {
    getPet: getPet.handler as (request: unknown) => Effect.Effect<unknown, unknown>,
    listPets: listPets.handler as (request: unknown) => Effect.Effect<unknown, unknown>
  }
  const fibers = { set: yield* FiberSet.make(), closing: () => false }

  const runtime = Runtime.make({
    context: Context.merge(getPet.context, (yield* Effect.runtime<never>()).context),
    fiberRefs: (yield* Effect.runtime<never>()).fiberRefs,
    runtimeFlags: (yield* Effect.runtime<never>()).runtimeFlags
  })
  // The handlers' requirements (the key their middleware provide) are not read by these two.
  const handlerRuntime = runtime as Runtime.Runtime<any>
  const runSync = Runtime.runSync(handlerRuntime)
  const url = "http://127.0.0.1:8080/v1/pets/5000"
  const request = new Request(url, { headers })
  const pet = runSync(pets.getPet({ path: { petId: 5000 } }).pipe(Effect.orDie))
  const pipeline = makePipeline(runtime, [getPet], Duration.seconds(15), fibers)
  const emptyGet = { ...getPet, handler: () => Effect.succeed(pet) }
  const bareGet = { ...emptyGet, middleware: [] }
  const emptyPipeline = makePipeline(runtime, [emptyGet, bareGet], Duration.seconds(15), fibers)
  const page = runSync(pets.listPets({ urlParams: {} }).pipe(Effect.orDie))

  // A create with `bench/create.lua`'s body; with a fresh Idempotency-Key each, growing as `bench/create.lua`'s values.
  const createBody = JSON.stringify({ name: "  Bench Pet  ", categoryId: 7, status: "pending" })
  const createHeaders = { ...headers, "content-type": "application/json" }
  let sent = 0
  const create = (keyed: boolean) => () =>
    server(
      new Request("http://127.0.0.1:8080/v1/pets", {
        method: "POST",
        headers: keyed
          ? {
            ...createHeaders,
            "idempotency-key": `"0190a3b4-1c2d-7abc-8def-${(sent++).toString(16).padStart(12, "0")}"`
          }
          : createHeaders,
        body: createBody
      })
    )

  // The two creates alternated, the first of a round in turn, after three rounds not counted (the first runs carry the
  // compilation of what a create runs).
  const creates = yield* Effect.promise(async () => {
    const runs = { plain: [] as Array<number>, keyed: [] as Array<number> }
    for (let round = 0; round < 8; round++) {
      for (const kind of round % 2 === 0 ? ["plain", "keyed"] as const : ["keyed", "plain"] as const) {
        const used = await cpuAsync(create(kind === "keyed"), BATCH)
        if (round >= 3) runs[kind].push(used)
      }
    }
    return { plain: median(runs.plain), keyed: median(runs.keyed) }
  })

  // The input of a get one, as the server hands it to the pipeline.
  const getInput = { request, started: 0, params: { petId: "5000" }, query: {}, body: undefined, requestId: "x" }
  const rows: Array<readonly [string, number]> = [
    ["a new Request (the test's own cost, in every whole-request row)", cpu(() => new Request(url, { headers }))],
    ["whole request: get one", yield* Effect.promise(() => cpuAsync(() => server(new Request(url, { headers }))))],
    [
      "whole request: list 20",
      yield* Effect.promise(() => cpuAsync(() => server(new Request("http://127.0.0.1:8080/v1/pets", { headers }))))
    ],
    [`whole request: create (${BATCH} at a time, median of 5)`, creates.plain],
    [`whole request: create with an Idempotency-Key (${BATCH} at a time, median of 5)`, creates.keyed],
    [
      "gate: head limits, target, body plan",
      cpu(() => {
        Gate.headRefusal(request.url, request.headers)
        Gate.targetRefusal(request.url)
        Gate.bodyPlan(false, request)
      })
    ],
    ["route table: path and match", cpu(() => table.match(pathOf(request.url), request.method))],
    ["query: read (list)", cpu(() => queryOf("http://127.0.0.1:8080/v1/pets?limit=20&status=sold"))],
    ["decode: path (get one)", cpu(() => getPet.decodePath!({ petId: "5000" }))],
    ["decode: query (list)", cpu(() => listPets.decodeQuery!({ limit: "20", status: "sold" }))],
    [
      "a fiber per request (an empty effect, forked, with the request's context)",
      cpu(() => {
        const services = new Map()
        Runtime.runFork(
          Runtime.make({
            context: Context.unsafeMake(services),
            fiberRefs: runtime.fiberRefs,
            runtimeFlags: runtime.runtimeFlags
          })
        )(Effect.void)
      })
    ],
    [
      "platform request for the middleware (fromWeb, headers read)",
      cpu(() => HttpServerRequest.fromWeb(request).headers)
    ],
    [
      "the pipeline alone: get one (decode, then middleware, handler and encode in a fiber)",
      cpu(() => pipeline(getPet, getInput))
    ],
    [
      "  the same with a handler that does nothing",
      cpu(() => emptyPipeline(emptyGet, getInput))
    ],
    [
      "  the same without middleware either",
      cpu(() => emptyPipeline(bareGet, getInput))
    ],
    [
      "handler: get one, run in a fiber (its SQLite read included)",
      cpu(() => runSync(pets.getPet({ path: { petId: 5000 } }).pipe(Effect.either)))
    ],
    [
      "handler: list 20, run in a fiber (its SQLite read included)",
      cpu(() => runSync(pets.listPets({ urlParams: {} }).pipe(Effect.either)))
    ],
    ["encode: one pet", cpu(() => getPet.encodeSuccess(pet))],
    ["encode: 20 pets", cpu(() => listPets.encodeSuccess(page))],
    [
      "answer: a Response with the server's headers",
      cpu(() =>
        new Response("{}", {
          status: 200,
          headers: {
            "content-type": "application/json",
            "x-request-id": "x",
            "x-content-type-options": "nosniff",
            "cache-control": "no-store"
          }
        })
      )
    ]
  ]
  console.log("| stage | CPU µs per request |\n|---|---|")
  for (const [stage, us] of rows) console.log(`| ${stage} | ${us} |`)
})

await Effect.runPromise(Effect.scoped(program).pipe(Logger.withMinimumLogLevel(LogLevel.Warning)))
