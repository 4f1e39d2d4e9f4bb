/**
 * `/metrics` on `METRICS_ADDRESS`, read by a Prometheus text-format parser (`prom2javascript`): the request histogram's
 * buckets and count move by method, route and status as requests are observed, requests in flight go up and down,
 * statement durations move by operation, the build and process figures are there; the listener is its own, and the
 * API does not serve `/metrics`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { resolve } from "node:path"
import { getMetricsFromIterator, type PromData, type PromHistogramData, type PromMetrics } from "prom2javascript"
import { PetsRepo } from "../src/Pets/Repo.js"
import { describePostgres, SQLite } from "./support/backends.js"
import { makeTestServer } from "./support/http.js"
import { configuredHooks, freePort, repositoriesOn, withEnvironment } from "./support/observability.js"
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
