/**
 * `/metrics` on `METRICS_ADDRESS`, read by a Prometheus text-format parser (`prom2javascript`): the request histogram's
 * buckets and count move by method, route and status as requests are observed, requests in flight go up and down,
 * statement durations move by operation, the build and process figures are there; the span counters follow what the
 * OTLP exporter does with the spans, against a collector that takes them and one that fails; the listener is its own,
 * and the API does not serve `/metrics`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { resolve } from "node:path"
import { getMetricsFromIterator, type PromData, type PromHistogramData, type PromMetrics } from "prom2javascript"
import { ObservabilityLive } from "../src/Observability/Live.js"
import { EXPORTS_IN_FLIGHT } from "../src/Observability/OtlpSpanCounts.js"
import { PetsRepo } from "../src/Pets/Repo.js"
import { describePostgres, SQLite } from "./support/backends.js"
import { makeTestServer } from "./support/http.js"
import { configuredHooks, freePort, repositoriesOn, withEnvironment } from "./support/observability.js"
import { otlpReceiver } from "./support/otlp.js"
import { parseHead, requestText, sendRaw } from "./support/wire.js"

const scrape = (port: number) =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${port}/metrics`)
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8")
    const text = await response.text()
    return getMetricsFromIterator(text.split("\n")[Symbol.iterator]())
  })

const series = <A extends { labels: Record<string, string> }>(
  metrics: PromMetrics,
  name: string,
  labels: Record<string, string> = {}
): A | undefined =>
  (metrics[name]?.data as unknown as Array<A> | undefined)?.find((data) =>
    Object.entries(labels).every(([key, value]) => data.labels[key] === value)
  )

const gauge = (metrics: PromMetrics, name: string, labels?: Record<string, string>) =>
  series<PromData>(metrics, name, labels)?.value

const GET_PET = { http_request_method: "GET", http_route: "/v1/pets/{petId}", http_response_status_code: "200" }
const SELECT_PETS = { db_system_name: "sqlite", db_operation_name: "SELECT", db_collection_name: "pets" }

describe("metrics", () => {
  it.scoped("/metrics on METRICS_ADDRESS: histograms and gauges move as requests and statements are made", () =>
    Effect.gen(function*() {
      const url = yield* SQLite.freshDatabase
      const port = yield* freePort
      yield* Effect.gen(function*() {
        const hooks = yield* configuredHooks
        const pets = yield* PetsRepo
        const pet = yield* pets.create({ name: "Rex", categoryId: 1, status: "available" })
        const before = yield* scrape(port)
        const countBefore = series<PromHistogramData>(before, "http_server_request_duration_seconds", GET_PET)?.count ??
          0
        const statementsBefore = series<PromHistogramData>(before, "db_client_operation_duration_seconds", SELECT_PETS)
          ?.count ?? 0

        const open = hooks.observeRequest({
          method: "GET",
          route: "/v1/pets/{petId}",
          path: `/v1/pets/${pet.id}`,
          headers: new Headers()
        })
        expect(gauge(yield* scrape(port), "http_server_active_requests")).toBe(1)
        yield* pets.findById(pet.id)
        yield* pets.findById(pet.id)
        open.end(200, "0123456789ab")
        hooks.observeRequest({ method: "BREW", route: undefined, path: "/coffee", headers: new Headers() }).end(
          404,
          undefined
        )

        const after = yield* scrape(port)
        expect(gauge(after, "http_server_active_requests")).toBe(0)
        expect(metricsType(after, "http_server_request_duration_seconds")).toBe("histogram")
        expect(metricsType(after, "db_client_operation_duration_seconds")).toBe("histogram")
        const requests = series<PromHistogramData>(after, "http_server_request_duration_seconds", GET_PET)!
        expect(requests.count).toBe(countBefore + 1)
        expect(requests.buckets["+Inf"]).toBe(requests.count)
        // Buckets are cumulative: each at least the one before it.
        const counts = Object.entries(requests.buckets)
          .sort(([a], [b]) => Number(a.replace("+Inf", "Infinity")) - Number(b.replace("+Inf", "Infinity")))
          .map(([, count]) => count)
        for (let i = 1; i < counts.length; i++) expect(counts[i]).toBeGreaterThanOrEqual(counts[i - 1])
        expect(requests.sum).toBeGreaterThan(0)
        // A method no one declared is `_OTHER`, an unmatched path has no route: the client does not choose labels.
        expect(series(after, "http_server_request_duration_seconds", {
          http_request_method: "_OTHER",
          http_route: "",
          http_response_status_code: "404"
        })).toBeDefined()

        const statements = series<PromHistogramData>(after, "db_client_operation_duration_seconds", SELECT_PETS)!
        expect(statements.count).toBe(statementsBefore + 2)

        expect(gauge(after, "petstore_build_info", { version: "9.9.9" })).toBe(1)
        expect(gauge(after, "petstore_draining")).toBe(0)
        expect(gauge(after, "process_resident_memory_bytes")).toBeGreaterThan(1_000_000)
        expect(gauge(after, "process_cpu_seconds_total")).toBeGreaterThan(0)
        expect(gauge(after, "process_open_fds")).toBeGreaterThan(2)
        expect(gauge(after, "process_start_time_seconds")).toBeGreaterThan(Date.now() / 1000 - 3600)
        // The event-loop delay is a gauge from the start, before its first 5-second window is over.
        expect(metricsType(after, "petstore_event_loop_delay_seconds")).toBe("gauge")
        expect(gauge(after, "petstore_event_loop_delay_seconds")).toBeGreaterThanOrEqual(0)

        // The Grafana dashboard asks for metrics the service has (PostgreSQL's pool aside, which exists only on
        // PostgreSQL).
        const dashboard = readFileSync(resolve(import.meta.dirname, "../ops/grafana/petstore.json"), "utf8")
        const asked = new Set(
          [...dashboard.matchAll(/\b((?:http|db|process|petstore)_[a-z_]+?)(?:_bucket|_count|_sum)?\{/g)].map((m) =>
            m[1]
          )
        )
        const elsewhere = /^db_client_connection/
        expect([...asked].filter((name) => !(name in after) && !elsewhere.test(name))).toEqual([])
        expect(asked.size).toBeGreaterThan(8)
      }).pipe(Effect.provide(repositoriesOn(url)), withEnvironment({ METRICS_ADDRESS: `127.0.0.1:${port}` }))
    }))

  it.scoped("the metrics listener serves /metrics alone; the API does not serve it", () =>
    Effect.gen(function*() {
      const url = yield* SQLite.freshDatabase
      const port = yield* freePort
      yield* Effect.gen(function*() {
        const elsewhere = yield* Effect.promise(() => fetch(`http://127.0.0.1:${port}/v1/pets`))
        expect(elsewhere.status).toBe(404)
        const posted = yield* Effect.promise(() => fetch(`http://127.0.0.1:${port}/metrics`, { method: "POST" }))
        expect(posted.status).toBe(405)
        // A HEAD: the GET's headers, a length, no body.
        const head = parseHead((yield* sendRaw(port, requestText("HEAD", "/metrics"))).bytes)
        expect(head.status).toBe(200)
        expect(head.headers["content-type"]).toBe("text/plain; version=0.0.4; charset=utf-8")
        expect(Number(head.headers["content-length"])).toBeGreaterThan(100)
        expect(head.rest.length).toBe(0)
      }).pipe(Effect.provide(repositoriesOn(url)), withEnvironment({ METRICS_ADDRESS: `127.0.0.1:${port}` }))
      const api = yield* makeTestServer
      expect((yield* Effect.promise(() => api.fetch("/metrics"))).status).toBe(404)
    }))

  it.effect("a METRICS_ADDRESS that is not host:port stops start-up naming the variable", () =>
    Effect.gen(function*() {
      const url = yield* SQLite.freshDatabase
      const error = yield* Effect.flip(
        Effect.provide(Effect.void, repositoriesOn(url)).pipe(withEnvironment({ METRICS_ADDRESS: "9464" }))
      )
      expect(String(error)).toContain("METRICS_ADDRESS")
      expect(String(error)).toContain("host:port")
    }).pipe(Effect.scoped))
})

describe("span counters", () => {
  const spansOf = (metrics: PromMetrics) => ({
    exported: gauge(metrics, "petstore_otel_spans_exported_total"),
    dropped: gauge(metrics, "petstore_otel_spans_dropped_total"),
    queued: gauge(metrics, "petstore_otel_spans_queued")
  })

  /** Scrapes until `done` holds of the span figures (the export runs in the background), 15 s at most. */
  const scrapeUntil = (port: number, done: (figures: ReturnType<typeof spansOf>) => boolean) =>
    Effect.gen(function*() {
      for (let i = 0;; i++) {
        const figures = spansOf(yield* scrape(port))
        if (done(figures) || i === 150) return figures
        yield* Effect.sleep("100 millis")
      }
    })

  /** `count` requests observed and answered: a server span each. */
  const endSpans = (hooks: Effect.Effect.Success<typeof configuredHooks>, count: number) => {
    for (let i = 0; i < count; i++) {
      hooks.observeRequest({ method: "GET", route: "/v1/pets", path: "/v1/pets", headers: new Headers() }).end(
        200,
        undefined
      )
    }
  }

  /** Observability alone, as `env` configures it, with /metrics on `port` (no database: its migrations make spans). */
  const observed = (port: number, env: Record<string, string>) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
    self.pipe(
      Effect.provide(ObservabilityLive("9.9.9")),
      withEnvironment({
        ...env,
        METRICS_ADDRESS: `127.0.0.1:${port}`,
        OTEL_BSP_SCHEDULE_DELAY: "600000"
      })
    )

  for (const protocol of ["http/protobuf", "http/json"] as const) {
    it.scopedLive(`${protocol}: the spans the collector took are exported; spans short of a batch are queued`, () =>
      Effect.gen(function*() {
        const receiver = yield* otlpReceiver
        const port = yield* freePort
        yield* Effect.gen(function*() {
          const hooks = yield* configuredHooks
          const first = yield* scrape(port)
          expect(metricsType(first, "petstore_otel_spans_exported_total")).toBe("counter")
          expect(metricsType(first, "petstore_otel_spans_dropped_total")).toBe("counter")
          expect(metricsType(first, "petstore_otel_spans_queued")).toBe("gauge")
          const before = spansOf(first)
          expect(before.queued).toBe(0)

          endSpans(hooks, 2)
          expect(spansOf(yield* scrape(port))).toEqual({ ...before, queued: 2 })
          endSpans(hooks, 1) // the batch is full: it leaves
          const after = yield* scrapeUntil(port, ({ exported }) => exported === before.exported! + 3)
          expect(receiver.spans).toHaveLength(3)
          expect(after).toEqual({ ...before, exported: before.exported! + receiver.spans.length })
        }).pipe(observed(port, {
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
          OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
          OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "3"
        }))
      }))
  }

  for (const failure of ["answers 500", "refuses connections"] as const) {
    it.scopedLive(`a collector that ${failure}: each batch is sent once and dropped, and the exports go on`, () =>
      Effect.gen(function*() {
        const receiver = yield* otlpReceiver
        receiver.status = 500
        const port = yield* freePort
        const endpoint = failure === "answers 500" ? receiver.url : `http://127.0.0.1:${yield* freePort}`
        const attempts = () => receiver.bodies.filter((body) => body.path === "/v1/traces").length
        yield* Effect.gen(function*() {
          const hooks = yield* configuredHooks
          const before = spansOf(yield* scrape(port))

          endSpans(hooks, 2) // a full batch: it leaves
          // Queued while it is sent; the collector's refusal may already have come (a refused connection comes at once).
          expect([{ ...before, queued: 2 }, { ...before, dropped: before.dropped! + 2 }]).toContainEqual(
            spansOf(yield* scrape(port))
          )
          const failed = yield* scrapeUntil(port, ({ dropped }) => dropped === before.dropped! + 2)
          expect(failed).toEqual({ ...before, dropped: before.dropped! + 2 })
          if (failure === "answers 500") expect(attempts()).toBe(1)

          // No pause: the next batch is sent, and taken once the collector answers again.
          receiver.status = 200
          endSpans(hooks, 2)
          const next = yield* scrapeUntil(
            port,
            ({ dropped, exported }) => dropped! + exported! === before.dropped! + before.exported! + 4
          )
          if (failure === "answers 500") {
            expect(next).toEqual({ ...before, dropped: before.dropped! + 2, exported: before.exported! + 2 })
            expect(attempts()).toBe(2)
          } else {
            expect(next).toEqual({ ...before, dropped: before.dropped! + 4 })
          }
        }).pipe(observed(port, {
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${endpoint}/v1/traces`,
          OTEL_EXPORTER_OTLP_TIMEOUT: "1000",
          OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "2"
        }))
      }))
  }

  it.scopedLive(`a collector that hangs holds ${EXPORTS_IN_FLIGHT} exports, each until its timeout; a full queue drops`, () =>
    Effect.gen(function*() {
      const receiver = yield* otlpReceiver
      receiver.hanging = true
      const port = yield* freePort
      yield* Effect.gen(function*() {
        const hooks = yield* configuredHooks
        const before = spansOf(yield* scrape(port))
        // Batches of one, 3 spans held at most: 2 being sent, 1 waiting its turn, the last 2 dropped.
        for (let i = 0; i < 5; i++) {
          endSpans(hooks, 1) // a full batch: it leaves
          yield* Effect.sleep("50 millis")
        }
        expect(receiver.requests.open).toBe(EXPORTS_IN_FLIGHT)
        expect(spansOf(yield* scrape(port))).toEqual({ ...before, dropped: before.dropped! + 2, queued: 3 })
        // Each is given up on at its timeout, the waiting one after its turn; then the collector takes the next.
        const given = yield* scrapeUntil(port, ({ dropped }) => dropped === before.dropped! + 5)
        expect(given).toEqual({ ...before, dropped: before.dropped! + 5 })
        expect(receiver.requests).toMatchObject({ open: 0, mostOpen: EXPORTS_IN_FLIGHT, abandoned: 3 })
        receiver.hanging = false
        endSpans(hooks, 1)
        const taken = yield* scrapeUntil(port, ({ exported }) => exported === before.exported! + 1)
        expect(taken).toEqual({ ...before, dropped: before.dropped! + 5, exported: before.exported! + 1 })
      }).pipe(observed(port, {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
        OTEL_EXPORTER_OTLP_TIMEOUT: "1000",
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "1",
        OTEL_BSP_MAX_QUEUE_SIZE: "3"
      }))
    }))
})

describePostgres((backend) => {
  it.scoped("the pool's state, and statement durations by operation", () =>
    Effect.gen(function*() {
      const url = yield* backend.freshDatabase
      const port = yield* freePort
      yield* Effect.gen(function*() {
        const pets = yield* PetsRepo
        const pet = yield* pets.create({ name: "Rex", categoryId: 1, status: "available" })
        yield* pets.findById(pet.id)
        const metrics = yield* scrape(port)
        expect(gauge(metrics, "db_client_connection_max")).toBe(10)
        expect(gauge(metrics, "db_client_connection_count", { db_client_connection_state: "idle" }))
          .toBeGreaterThanOrEqual(1)
        expect(gauge(metrics, "db_client_connection_count", { db_client_connection_state: "used" })).toBe(0)
        expect(gauge(metrics, "db_client_connection_pending_requests")).toBe(0)
        for (const operation of ["INSERT", "SELECT"]) {
          const statements = series<PromHistogramData>(metrics, "db_client_operation_duration_seconds", {
            db_system_name: "postgresql",
            db_operation_name: operation,
            db_collection_name: "pets"
          })
          expect(statements?.count).toBeGreaterThanOrEqual(1)
        }
      }).pipe(Effect.provide(repositoriesOn(url)), withEnvironment({ METRICS_ADDRESS: `127.0.0.1:${port}` }))
    }))
})

const metricsType = (metrics: PromMetrics, name: string) => metrics[name]?.type
