/**
 * The service's metrics, kept in Effect's metric registry (`Metric`): `/metrics` renders its snapshot in the Prometheus
 * text format (`Prometheus.ts`) and `@effect/opentelemetry`'s `OtlpMetrics` exports the same snapshot. Names follow the
 * OpenTelemetry semantic conventions as a Prometheus exporter spells them.
 *
 * The request path only bumps numbers: each series (a histogram's labels) is made once and kept here, then updated with
 * `unsafeUpdate`; `Metric.tagged` would look the series up in the registry again, a new key hashed, on every update.
 * Kept because `Metric.tagged` cost a get one with metrics on more than 10 % (`bench/results/2026-11-27-observability-otlptracer.md`).
 * The process figures are read when the metrics are read (`refreshProcessMetrics`), except the event-loop delay.
 */
import { Metric, MetricBoundaries, MetricKey, type MetricKeyType, MetricLabel } from "effect"
import { readdirSync } from "node:fs"
import { drainingGauge } from "../Operations/Lifecycle.js"

/** The extra labels of every update here: none, one array for all. */
const NO_TAGS: ReadonlyArray<MetricLabel.MetricLabel> = []

/** One series of a metric: the metric of its tagged key. */
const series = <Type extends MetricKeyType.MetricKeyType.Untyped>(
  key: MetricKey.MetricKey<Type>,
  labels: Record<string, string>
) =>
  Metric.fromMetricKey(
    MetricKey.taggedWithLabels(key, Object.entries(labels).map(([name, value]) => MetricLabel.make(name, value)))
  )

/** A histogram's series by their label values, each made once, updated with a value. */
const histogram = (name: string, description: string, buckets: ReadonlyArray<number>) => {
  const key = MetricKey.histogram(name, MetricBoundaries.fromIterable(buckets), description)
  const made = new Map<string, Metric.Metric<MetricKeyType.MetricKeyType.Histogram, number, unknown>>()
  return (labels: Record<string, string>): (value: number) => void => {
    const id = Object.values(labels).join(" ")
    let found = made.get(id)
    if (found === undefined) made.set(id, found = series(key, labels))
    const metric = found
    return (value) => metric.unsafeUpdate(value, NO_TAGS)
  }
}

/** Buckets from 1 ms to 10 s, the semantic conventions' with two finer ones below 5 ms. */
const requestDurations = histogram(
  "http_server_request_duration_seconds",
  "Duration of HTTP server requests, by method, route and status",
  [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]
)
const statementDurations = histogram(
  "db_client_operation_duration_seconds",
  "Duration of database statements, by database system, operation and table",
  [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]
)
const requestsInFlight = Metric.gauge("http_server_active_requests", { description: "HTTP requests being answered" })
const buildInfo = Metric.gauge("petstore_build_info", { description: "Always 1; the version is a label" })

// ------------------------------------------------------------------------------------------------------------ requests

/** The methods the semantic conventions name; any other is `_OTHER` (a client does not get to choose label values). */
const KNOWN_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"])

export const methodLabel = (method: string): string => (KNOWN_METHODS.has(method) ? method : "_OTHER")

export type RequestRecorder = (status: number, seconds: number) => void

const requestRecorders = new Map<string, Map<string, RequestRecorder>>()

/** What records the answered requests of one method and route (`""`: no route), made once per pair. */
export const requestRecorder = (method: string, route: string): RequestRecorder => {
  let byRoute = requestRecorders.get(method)
  if (byRoute === undefined) requestRecorders.set(method, byRoute = new Map())
  let recorder = byRoute.get(route)
  if (recorder === undefined) {
    const byStatus = new Map<number, (seconds: number) => void>()
    recorder = (status, seconds) => {
      let record = byStatus.get(status)
      if (record === undefined) {
        record = requestDurations({
          http_request_method: method,
          http_route: route,
          http_response_status_code: String(status)
        })
        byStatus.set(status, record)
      }
      record(seconds)
    }
    byRoute.set(route, recorder)
  }
  return recorder
}

export const addInFlight = (delta: number): void => requestsInFlight.unsafeModify(delta, NO_TAGS)

/** One statement's duration, its series found by the statement's description (made once per description). */
const statementSeries = new WeakMap<object, (seconds: number) => void>()
export const recordStatement = (
  statement: { readonly system: string; readonly operation: string; readonly collection: string },
  seconds: number
): void => {
  let record = statementSeries.get(statement)
  if (record === undefined) {
    record = statementDurations({
      db_system_name: statement.system,
      db_operation_name: statement.operation,
      db_collection_name: statement.collection
    })
    statementSeries.set(statement, record)
  }
  record(seconds)
}

// ------------------------------------------------------------------------------------------------- pools and process

const connections = MetricKey.gauge("db_client_connection_count", { description: "Connections of the pool, by state" })
const idleConnections = series(connections, { db_client_connection_state: "idle" })
const usedConnections = series(connections, { db_client_connection_state: "used" })
const pendingRequests = Metric.gauge("db_client_connection_pending_requests", {
  description: "Requests waiting for a connection of the pool"
})
const maxConnections = Metric.gauge("db_client_connection_max", { description: "The most connections the pool opens" })
const residentMemory = Metric.gauge("process_resident_memory_bytes", { description: "Resident memory size" })
const cpuSeconds = Metric.counter("process_cpu_seconds_total", { description: "User and system CPU time spent" })
const openFds = Metric.gauge("process_open_fds", { description: "Open file descriptors" })
const startTime = Metric.gauge("process_start_time_seconds", { description: "Start time, seconds since the epoch" })
const eventLoopDelay = Metric.gauge("petstore_event_loop_delay_seconds", {
  description: "The longest delay of a timer over the last 5 s: how long the event loop was kept from its next turn"
})

/** Extra figures read at each refresh (the PostgreSQL pool's state). */
const collectors = new Set<() => void>()

/** Reports the pool's state at each refresh; returns the stop. */
export const addPool = (pool: { totalCount: number; idleCount: number; waitingCount: number }, max: number) => {
  maxConnections.unsafeUpdate(max, NO_TAGS)
  const collect = () => {
    idleConnections.unsafeUpdate(pool.idleCount, NO_TAGS)
    usedConnections.unsafeUpdate(pool.totalCount - pool.idleCount, NO_TAGS)
    pendingRequests.unsafeUpdate(pool.waitingCount, NO_TAGS)
  }
  collectors.add(collect)
  return () => collectors.delete(collect)
}

let cpuMicrosSeen = 0

/** Reads the process figures into their gauges; called before the registry is read. */
export const refreshProcessMetrics = (): void => {
  residentMemory.unsafeUpdate(process.memoryUsage.rss(), NO_TAGS)
  const cpu = process.cpuUsage()
  cpuSeconds.unsafeUpdate((cpu.user + cpu.system - cpuMicrosSeen) / 1e6, NO_TAGS)
  cpuMicrosSeen = cpu.user + cpu.system
  try {
    openFds.unsafeUpdate(readdirSync("/proc/self/fd").length - 1, NO_TAGS) // less the one reading the directory
  } catch {
    // not Linux: no figure
  }
  for (const collect of collectors) collect()
}

/**
 * Starts the metrics that need starting: the build info, the start time and the event-loop delay (a timer every
 * 100 ms that measures how late it fires, the worst of 50 kept; it does not keep the process alive). Returns its stop.
 */
export const startProcessMetrics = (version: string): () => void => {
  buildInfo.pipe(Metric.tagged("version", version)).unsafeUpdate(1, NO_TAGS)
  startTime.unsafeUpdate(Math.round(Date.now() / 1000 - process.uptime()), NO_TAGS)
  drainingGauge.unsafeModify(0, NO_TAGS) // registered, and 0 unless the drain has started
  requestsInFlight.unsafeUpdate(0, NO_TAGS)
  eventLoopDelay.unsafeUpdate(0, NO_TAGS) // registered from the start; the first window's figure comes after 5 s
  let expected = performance.now() + 100
  let worst = 0
  let samples = 0
  const timer = setInterval(() => {
    const now = performance.now()
    worst = Math.max(worst, now - expected)
    expected = now + 100
    if (++samples < 50) return
    eventLoopDelay.unsafeUpdate(worst / 1000, NO_TAGS)
    worst = 0
    samples = 0
  }, 100)
  timer.unref()
  return () => clearInterval(timer)
}
