/**
 * Traces over OTLP/HTTP to a real receiver (`support/otlp.ts`, decoding what the exporter sends): the server span of a
 * request made with a `traceparent` joins the client's trace with the HTTP attributes and the key id, its database
 * statements are its children, nothing of the key leaves the process; an unsampled request exports nothing; a
 * collector that is down costs requests nothing and the log says so (the span counters are `Metrics.test.ts`'s). Also
 * the samplers, and the trace ids in log lines.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Context, Effect, Exit, Layer, Logger, Option, Redacted, Scope, Tracer } from "effect"
import { randomBytes } from "node:crypto"
import { ApiKeys } from "../src/Auth/ApiKeys.js"
import * as Sql from "../src/Database/Sql.js"
import { ObservabilityConfig, type SamplerName } from "../src/Observability/Config.js"
import { ObservabilityLive } from "../src/Observability/Live.js"
import {
  makeSampler,
  makeSamplingTracer,
  NOT_SAMPLED,
  randomnessOf,
  remoteParent
} from "../src/Observability/Tracer.js"
import { PetsRepo } from "../src/Pets/Repo.js"
import { describePostgres, SQLite } from "./support/backends.js"
import { authorized, testServerOn } from "./support/http.js"
import { secretOf } from "./support/keys.js"
import { configuredHooks, freePort, repositoriesOn, withEnvironment } from "./support/observability.js"
import { otlpReceiver } from "./support/otlp.js"

const newTraceId = () => randomBytes(16).toString("hex")
const newSpanId = () => randomBytes(8).toString("hex")

/** A tracer that records the names of the spans it makes (as the OTLP tracer would record and export them). */
const recordingTracer = (made: Array<string>): Tracer.Tracer =>
  Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      made.push(name)
      return {
        ...NOT_SAMPLED,
        name,
        traceId: Option.isSome(parent) ? parent.value.traceId : newTraceId(),
        spanId: newSpanId(),
        parent,
        context,
        links,
        kind,
        sampled: true,
        status: { _tag: "Started", startTime }
      }
    },
    context: (f) => f()
  })

describe("traces over OTLP", () => {
  for (const protocol of ["http/protobuf", "http/json"] as const) {
    it.scoped(`${protocol}: the server span joins the client's trace, its statements are its children, the key stays`, () =>
      Effect.gen(function*() {
        const receiver = yield* otlpReceiver
        const url = yield* SQLite.freshDatabase
        const traceId = newTraceId()
        const clientSpanId = newSpanId()
        const unsampledTraceId = newTraceId()
        const made = yield* Effect.gen(function*() {
          const hooks = yield* configuredHooks
          const keys = yield* ApiKeys
          const pets = yield* PetsRepo
          const created = yield* keys.create("tracing")
          const key = Redacted.value(created.key)
          const pet = yield* pets.create({ name: "Rex", categoryId: 1, status: "available" })

          const request = hooks.observeRequest({
            method: "GET",
            route: "/v1/pets/{petId}",
            path: `/v1/pets/${pet.id}`,
            headers: new Headers({
              traceparent: `00-${traceId}-${clientSpanId}-01`,
              tracestate: "vendor=opaque",
              authorization: `Bearer ${key}`
            })
          })
          expect(request.parentSpan?.traceId).toBe(traceId)
          const authenticated = yield* keys.authenticate(Redacted.make(key)).pipe(
            Effect.zipLeft(pets.findById(pet.id)),
            Effect.withParentSpan(request.parentSpan!)
          )
          request.end(200, Option.getOrThrow(authenticated).id)

          const failing = hooks.observeRequest({
            method: "POST",
            route: "/v1/pets",
            path: "/v1/pets",
            headers: new Headers({ traceparent: `00-${traceId}-${clientSpanId}-01` })
          })
          failing.end(503, undefined)

          const unsampled = hooks.observeRequest({
            method: "GET",
            route: "/v1/pets",
            path: "/v1/pets",
            headers: new Headers({ traceparent: `00-${unsampledTraceId}-${clientSpanId}-00` })
          })
          expect(unsampled.parentSpan?.sampled).toBe(false)
          yield* pets.list({ limit: 5 }).pipe(Effect.withParentSpan(unsampled.parentSpan!))
          unsampled.end(200, created.id)
          return { key, keyId: created.id, petId: pet.id }
        }).pipe(
          // The layer closes at the end of this: the exporter's last flush.
          Effect.provide(repositoriesOn(url)),
          withEnvironment({
            OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
            OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
            OTEL_EXPORTER_OTLP_HEADERS: "x-collector-token=s3cret",
            // Read by petstore alone: OTEL_SERVICE_NAME wins over service.name, the build's version over service.version.
            OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=test,service.name=from-attributes,service.version=0.0.1",
            OTEL_SERVICE_NAME: "petstore",
            OTEL_METRIC_EXPORT_INTERVAL: "600000"
          })
        )

        const traceBodies = receiver.bodies.filter((body) => body.path === "/v1/traces")
        expect(traceBodies.length).toBeGreaterThan(0)
        for (const body of traceBodies) {
          expect(body.contentType).toBe(protocol === "http/json" ? "application/json" : "application/x-protobuf")
        }
        expect(receiver.headers[0].get("x-collector-token")).toBe("s3cret")

        const server = receiver.spans.find((span) => span.name === "GET /v1/pets/{petId}")!
        expect(server).toMatchObject({
          traceId,
          parentSpanId: clientSpanId,
          kind: 2,
          attributes: {
            "http.request.method": "GET",
            "http.route": "/v1/pets/{petId}",
            "url.path": `/v1/pets/${made.petId}`,
            "http.response.status_code": 200,
            "petstore.api_key.id": made.keyId
          }
        })
        expect(server.status.code).not.toBe(2)
        expect(server.resource).toMatchObject({
          "service.name": "petstore",
          "service.version": "9.9.9",
          "deployment.environment": "test"
        })
        expect(new Set(server.resourceKeys).size).toBe(server.resourceKeys.length)
        const children = receiver.spans.filter((span) => span.parentSpanId === server.spanId)
        // The key's lookup and the pet's (the key's last use is written later, in the background, off the request).
        expect(children.map((span) => span.name).sort()).toEqual(["SELECT api_keys", "SELECT pets"])
        for (const child of children) {
          expect(child).toMatchObject({ traceId, kind: 3, attributes: { "db.system.name": "sqlite" } })
          expect(child.attributes["db.operation.name"]).toBe(child.name.split(" ")[0])
          expect(child.attributes["db.query.text"]).toMatch(/WHERE id = \?/)
        }

        const failed = receiver.spans.find((span) => span.name === "POST /v1/pets")!
        expect(failed.attributes).toMatchObject({ "http.response.status_code": 503, "error.type": "503" })
        expect(failed.status.code).toBe(2)

        expect(receiver.spans.filter((span) => span.traceId === unsampledTraceId)).toEqual([])
        // Nothing of the key: not its secret, not the Authorization header, in any body sent.
        const secret = secretOf(made.key)
        for (const body of receiver.bodies) {
          expect(body.text).not.toContain(secret)
          expect(body.text.toLowerCase()).not.toContain("bearer")
        }
      }))
  }

  it.scopedLive("a collector that is down: requests are observed as usual, and the log says the export failed", () =>
    Effect.gen(function*() {
      const url = yield* SQLite.freshDatabase
      const port = yield* freePort
      const messages: Array<unknown> = []
      const capture = Logger.make(({ message }) => {
        messages.push(Array.isArray(message) ? message[0] : message)
      })
      yield* Effect.gen(function*() {
        const hooks = yield* configuredHooks
        const pets = yield* PetsRepo
        for (let i = 0; i < 5; i++) {
          const request = hooks.observeRequest({
            method: "GET",
            route: "/v1/pets",
            path: "/v1/pets",
            headers: new Headers()
          })
          const page = yield* pets.list({ limit: 5 }).pipe(Effect.withParentSpan(request.parentSpan!))
          expect(page.pets).toEqual([])
          request.end(200, undefined)
        }
      }).pipe(
        Effect.provide(repositoriesOn(url)),
        Effect.provide(Logger.replace(Logger.defaultLogger, capture)),
        withEnvironment({
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${port}/v1/traces`,
          OTEL_EXPORTER_OTLP_TIMEOUT: "2000"
        })
      )
      expect(messages.filter((message) => String(message).startsWith("OTLP export failed"))).toHaveLength(1)
    }))

  it.scopedLive("a full batch is sent soon after the span that filled it, without waiting for OTEL_BSP_SCHEDULE_DELAY", () =>
    Effect.gen(function*() {
      const receiver = yield* otlpReceiver
      const url = yield* SQLite.freshDatabase
      yield* Effect.gen(function*() {
        const hooks = yield* configuredHooks
        hooks.observeRequest({ method: "GET", route: "/v1/pets", path: "/v1/pets", headers: new Headers() }).end(
          200,
          undefined
        )
        // Sent soon after (on the next turn of the event loop), long before the schedule's delay, the exporter open.
        for (let i = 0; i < 200 && !receiver.spans.some((span) => span.name === "GET /v1/pets"); i++) {
          yield* Effect.sleep("10 millis")
        }
        expect(receiver.spans.map((span) => span.name)).toContain("GET /v1/pets")
      }).pipe(
        Effect.provide(repositoriesOn(url)),
        withEnvironment({
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
          OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "1",
          OTEL_BSP_SCHEDULE_DELAY: "600000",
          OTEL_METRIC_EXPORT_INTERVAL: "600000"
        })
      )
    }))

  it.scopedLive("spans short of a full batch wait for OTEL_BSP_SCHEDULE_DELAY or the end: exports are full batches", () =>
    Effect.gen(function*() {
      const receiver = yield* otlpReceiver
      const url = yield* SQLite.freshDatabase
      const named = () => receiver.spans.filter((span) => span.name === "GET /v1/pets").length
      yield* Effect.gen(function*() {
        const hooks = yield* configuredHooks
        // Three spans at once, batches of two: the full batch leaves; the third stays until the end.
        for (let i = 0; i < 3; i++) {
          hooks.observeRequest({ method: "GET", route: "/v1/pets", path: "/v1/pets", headers: new Headers() }).end(
            200,
            undefined
          )
        }
        for (let i = 0; i < 200 && named() < 2; i++) yield* Effect.sleep("10 millis")
        yield* Effect.sleep("300 millis")
        expect(named()).toBe(2)
      }).pipe(
        Effect.provide(repositoriesOn(url)),
        withEnvironment({
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
          OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "2",
          OTEL_BSP_SCHEDULE_DELAY: "600000"
        })
      )
      // The exporter's end sends the rest.
      expect(named()).toBe(3)
    }))

  it.scoped("log lines written under a sampled request's span carry its traceId and spanId", () =>
    Effect.gen(function*() {
      const receiver = yield* otlpReceiver
      const url = yield* SQLite.freshDatabase
      const lines: Array<Record<string, unknown>> = []
      const capture = Logger.make(({ annotations }) => {
        lines.push(Object.fromEntries(annotations))
      })
      const traceId = newTraceId()
      const spanId = yield* Effect.gen(function*() {
        const hooks = yield* configuredHooks
        const sampled = hooks.observeRequest({
          method: "GET",
          route: "/v1/pets",
          path: "/v1/pets",
          headers: new Headers({ traceparent: `00-${traceId}-${newSpanId()}-01` })
        })
        yield* Effect.logInfo("inside").pipe(Effect.withParentSpan(sampled.parentSpan!))
        const unsampled = hooks.observeRequest({
          method: "GET",
          route: "/v1/pets",
          path: "/v1/pets",
          headers: new Headers({ traceparent: `00-${newTraceId()}-${newSpanId()}-00` })
        })
        yield* Effect.logInfo("not sampled").pipe(Effect.withParentSpan(unsampled.parentSpan!))
        sampled.end(200, undefined)
        unsampled.end(200, undefined)
        return sampled.parentSpan!.spanId
      }).pipe(
        Effect.provide(repositoriesOn(url)),
        Effect.provide(Logger.replace(Logger.defaultLogger, capture)),
        withEnvironment({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_METRIC_EXPORT_INTERVAL: "600000" })
      )
      expect(lines).toContainEqual({ traceId, spanId })
      expect(lines.filter((line) => "traceId" in line)).toHaveLength(1)
    }))
})

describePostgres((backend) => {
  it.scoped("the statements @effect/sql runs on PostgreSQL are spans of the request's trace", () =>
    Effect.gen(function*() {
      const receiver = yield* otlpReceiver
      const url = yield* backend.freshDatabase
      const traceId = newTraceId()
      const serverSpanId = yield* Effect.gen(function*() {
        const hooks = yield* configuredHooks
        const pets = yield* PetsRepo
        const request = hooks.observeRequest({
          method: "POST",
          route: "/v1/pets",
          path: "/v1/pets",
          headers: new Headers({ traceparent: `00-${traceId}-${newSpanId()}-01` })
        })
        yield* pets.create({ name: "Rex", categoryId: 1, status: "available" }).pipe(
          Effect.withParentSpan(request.parentSpan!)
        )
        request.end(201, undefined)
        return request.parentSpan!.spanId
      }).pipe(
        Effect.provide(repositoriesOn(url)),
        withEnvironment({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_METRIC_EXPORT_INTERVAL: "600000" })
      )
      const inTrace = receiver.spans.filter((span) => span.traceId === traceId)
      const byId = new Map(inTrace.map((span) => [span.spanId, span]))
      const statement = inTrace.find((span) => span.attributes["db.system.name"] === "postgresql")!
      expect(statement.attributes["db.query.text"]).toMatch(/^INSERT INTO pets/)
      // Its ancestors lead to the server span.
      let ancestor = statement
      while (ancestor.spanId !== serverSpanId) ancestor = byId.get(ancestor.parentSpanId)!
      expect(ancestor.name).toBe("POST /v1/pets")
    }))
})

describe("sampling", () => {
  const ids = Array.from({ length: 20_000 }, newTraceId)
  const remote = (sampled: boolean) =>
    remoteParent(new Headers({ traceparent: `00-${newTraceId()}-${newSpanId()}-${sampled ? "01" : "00"}` }))

  it("traceidratio samples about its ratio of traces, and decides alike for the same trace id", () => {
    const sampler = makeSampler({ sampler: "traceidratio", ratio: 0.1 })
    const share = ids.filter((id) => sampler(randomnessOf(id), Option.none())).length / ids.length
    expect(share).toBeGreaterThan(0.08)
    expect(share).toBeLessThan(0.12)
    for (const id of ids.slice(0, 100)) {
      expect(sampler(randomnessOf(id), Option.none())).toBe(sampler(randomnessOf(id), Option.none()))
    }
  })

  it("a new trace is decided on the randomness of the id it gets: the id's lowest 56 bits", () => {
    expect(randomnessOf("4bf92f3577b34da6a3ce929d0e0e4700")).toBe(0xce929d0e0e47 * 256)
    expect(randomnessOf("4bf92f3577b34da6a300000000000000")).toBe(0)
    const given: Array<number> = []
    const tracer = makeSamplingTracer(
      (randomness) => {
        given.push(randomness)
        return true
      },
      recordingTracer([]),
      Clock.make()
    )
    // Enough ids to refill the pool of random bytes several times.
    const traceIds = Array.from({ length: 1000 }, () => tracer.sample(Option.none())!)
    expect(traceIds.every((id) => /^[0-9a-f]{32}$/.test(id))).toBe(true)
    expect(new Set(traceIds).size).toBe(traceIds.length)
    expect(traceIds.map(randomnessOf)).toEqual(given)
  })

  it("parentbased_* follow the client's sampled flag; the others decide for themselves", () => {
    const decide = (sampler: SamplerName, ratio: number, parent: ReturnType<typeof remote>) =>
      makeSampler({ sampler, ratio })(randomnessOf(newTraceId()), parent)
    expect(decide("parentbased_always_off", 1, remote(true))).toBe(true)
    expect(decide("parentbased_always_on", 1, remote(false))).toBe(false)
    expect(decide("parentbased_always_on", 1, Option.none())).toBe(true)
    expect(decide("parentbased_traceidratio", 0, remote(true))).toBe(true)
    expect(decide("always_on", 1, remote(false))).toBe(true)
    expect(decide("always_off", 1, remote(true))).toBe(false)
  })

  it("a span petstore starts is sampled first: an unsampled one is neither made nor timed, its children follow it", () => {
    const made: Array<string> = []
    let reads = 0
    const clock = { ...Clock.make(), unsafeCurrentTimeNanos: () => BigInt(++reads) }
    const tracer = (sampled: boolean) => makeSamplingTracer(() => sampled, recordingTracer(made), clock)
    expect(tracer(false).sample(Option.none())).toBeUndefined()
    expect(tracer(true).sample(Option.some(NOT_SAMPLED))).toBeUndefined()
    expect(tracer(true).span("unsampled child", Option.some(NOT_SAMPLED), Context.empty(), [], 0n, "client")).toBe(
      NOT_SAMPLED
    )
    expect([reads, made]).toEqual([0, []])
    const traceId = tracer(true).sample(Option.none())!
    // A root takes the trace id it was sampled on.
    const server = tracer(true).start("GET /v1/pets/{petId}", traceId, Option.none(), "server")
    // A child of a sampled span is sampled whatever the ratio: it follows its parent.
    expect(tracer(false).sample(Option.some(server))).toBe(traceId)
    const statement = tracer(false).span("SELECT pets", Option.some(server), Context.empty(), [], 2n, "client")
    expect([server.traceId, statement.traceId, server.status]).toEqual([traceId, traceId, {
      _tag: "Started",
      startTime: 1n
    }])
    expect(made).toEqual(["GET /v1/pets/{petId}", "SELECT pets"])
  })

  it("a malformed traceparent is no parent (the request starts its own trace)", () => {
    const id = newTraceId()
    for (
      const traceparent of [
        `00-${id}-${newSpanId()}`,
        `00-${id.toUpperCase()}-${newSpanId()}-01`,
        `00-${"0".repeat(32)}-${newSpanId()}-01`,
        `00-${id}-${"0".repeat(16)}-01`,
        `00-${id}-${newSpanId()}-1`,
        `ff-${id}-${newSpanId()}-01`
      ]
    ) expect(remoteParent(new Headers({ traceparent }))).toEqual(Option.none())
    expect(Option.map(remoteParent(new Headers({ traceparent: `00-${id}-${"a".repeat(16)}-01` })), (p) => p.traceId))
      .toEqual(Option.some(id))
  })
})

describe("configuration", () => {
  const bad: ReadonlyArray<readonly [Record<string, string>, string]> = [
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" }, "OTEL_EXPORTER_OTLP_ENDPOINT"],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "ftp://collector" }, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }, "OTEL_EXPORTER_OTLP_PROTOCOL"],
    [{ OTEL_EXPORTER_OTLP_HEADERS: "authorization" }, "OTEL_EXPORTER_OTLP_HEADERS"],
    [{ OTEL_RESOURCE_ATTRIBUTES: "region=%zz" }, "OTEL_RESOURCE_ATTRIBUTES"],
    [{ OTEL_TRACES_SAMPLER: "jaeger_remote" }, "OTEL_TRACES_SAMPLER"],
    [{ OTEL_TRACES_SAMPLER_ARG: "1.5" }, "OTEL_TRACES_SAMPLER_ARG"],
    [{ OTEL_BSP_MAX_QUEUE_SIZE: "0" }, "OTEL_BSP_MAX_QUEUE_SIZE"]
  ]
  for (const [env, variable] of bad) {
    it.effect(`a bad ${variable} is refused, naming it`, () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(ObservabilityConfig.pipe(withEnvironment(env)))
        expect(String(error)).toContain(variable)
        expect(String(error)).toMatch(/Expected/)
      }))
  }

  it.effect("the endpoint's signal paths, the service name and its precedence", () =>
    Effect.gen(function*() {
      const options = yield* ObservabilityConfig.pipe(withEnvironment({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/",
        OTEL_RESOURCE_ATTRIBUTES: "service.name=from-attributes,team=pets",
        OTEL_SERVICE_NAME: "from-variable"
      }))
      const otlp = Option.getOrThrow(options.otlp)
      expect(otlp).toMatchObject({
        tracesUrl: "http://collector:4318/v1/traces",
        metricsUrl: "http://collector:4318/v1/metrics",
        protocol: "http/protobuf",
        serviceName: "from-variable",
        resourceAttributes: { team: "pets" },
        sampling: { sampler: "parentbased_always_on", ratio: 1 }
      })
      const none = yield* ObservabilityConfig.pipe(withEnvironment({}))
      expect(Option.isNone(none.otlp) && Option.isNone(none.metricsAddress)).toBe(true)
    }))
})

describe("traces of HTTP requests", () => {
  /** The application on a fresh SQLite file, with observability as the environment configures it. */
  const observedServer = (env: Record<string, string>) =>
    Effect.flatMap(
      SQLite.freshDatabase,
      (url) => testServerOn(Sql.layer(url).pipe(Layer.provideMerge(ObservabilityLive("9.9.9"))))
    ).pipe(withEnvironment(env))

  it.scoped("every request gets its server span; a request with a traceparent joins the trace; the log line carries the ids", () =>
    Effect.gen(function*() {
      const receiver = yield* otlpReceiver
      const lines: Array<Record<string, unknown>> = []
      const capture = Logger.make(({ annotations, message }) => {
        lines.push({ message: Array.isArray(message) ? message[0] : message, ...Object.fromEntries(annotations) })
      })
      const traceId = newTraceId()
      const clientSpanId = newSpanId()
      const scope = yield* Scope.make()
      const server = yield* observedServer({
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_METRIC_EXPORT_INTERVAL: "600000"
      }).pipe(
        Scope.extend(scope),
        Effect.provide(Logger.replace(Logger.defaultLogger, capture))
      )
      const traceparent = `00-${traceId}-${clientSpanId}-01`
      const created = yield* Effect.promise(() =>
        server.fetch(
          "/v1/pets",
          authorized(server.key, {
            method: "POST",
            body: JSON.stringify({ name: "Rex", categoryId: 1 }),
            headers: { traceparent }
          })
        )
      )
      expect(created.status).toBe(201)
      const pet = (yield* Effect.promise(() => created.json())) as { readonly id: number }
      const got = yield* Effect.promise(() =>
        server.fetch(`/v1/pets/${pet.id}`, authorized(server.key, { headers: { traceparent } }))
      )
      expect(got.status).toBe(200)
      expect((yield* Effect.promise(() => server.fetch("/nowhere", { headers: { traceparent } }))).status).toBe(404)
      expect((yield* Effect.promise(() => server.fetch("/healthz", { headers: { traceparent } }))).status).toBe(200)
      yield* Scope.close(scope, Exit.void) // the exporter's last flush

      const inTrace = receiver.spans.filter((span) => span.traceId === traceId)
      const named = (name: string) => inTrace.find((span) => span.name === name)!
      const keyId = server.key.split("_")[1]
      expect(named("POST /v1/pets")).toMatchObject({
        parentSpanId: clientSpanId,
        kind: 2,
        attributes: { "http.route": "/v1/pets", "http.response.status_code": 201, "petstore.api_key.id": keyId }
      })
      const get = named("GET /v1/pets/{petId}")
      expect(get.attributes).toMatchObject({ "url.path": `/v1/pets/${pet.id}`, "http.response.status_code": 200 })
      expect(inTrace.filter((span) => span.parentSpanId === get.spanId).map((span) => span.name)).toContain(
        "SELECT pets"
      )
      expect(named("GET").attributes).toMatchObject({ "url.path": "/nowhere", "http.response.status_code": 404 })
      expect(named("GET").attributes["http.route"]).toBeUndefined()
      expect(named("GET /healthz").attributes).toMatchObject({ "http.response.status_code": 200 })
      for (const body of receiver.bodies) {
        expect(body.text).not.toContain(secretOf(server.key))
      }

      const requestLine = lines.find((line) => line.message === "request" && line.path === `/v1/pets/${pet.id}`)!
      expect(requestLine).toMatchObject({ traceId, spanId: get.spanId, keyId })
    }))

  it.scopedLive("with the collector down, requests answer as usual", () =>
    Effect.gen(function*() {
      const port = yield* freePort
      const server = yield* observedServer({
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
        OTEL_BSP_SCHEDULE_DELAY: "10"
      })
      for (let i = 0; i < 20; i++) {
        const response = yield* Effect.promise(() => server.fetch("/v1/pets", authorized(server.key)))
        expect(response.status).toBe(200)
        yield* Effect.sleep("5 millis")
      }
    }))
})
