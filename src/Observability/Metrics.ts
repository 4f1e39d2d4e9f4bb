/**
 * The service's metrics, kept in Effect's metric registry (`Metric`): `/metrics` renders the registry's snapshot in the
 * Prometheus text format (`Prometheus.ts`) and `@effect/opentelemetry`'s `OtlpMetrics` exports the same snapshot. Names
 * follow the OpenTelemetry semantic conventions as a Prometheus exporter spells them.
 *
 * The request path only bumps numbers: each (method, route, status) gets its series once, cached here, and is then
 * updated with `unsafeUpdate` (a binary search over the buckets and a few additions, no fiber and no allocation). A
 * series is a metric of its own tagged key (`series`), not `Metric.tagged`, whose every update looks its series up in the
 * registry again (a new key, hashed, per update: it cost more than the rest of the counting).
 * The process figures are read when the metrics are read (`refreshProcessMetrics`), not on a timer, except the
 * event-loop delay, which can only be seen by a timer.
 */
import { Metric, MetricBoundaries, MetricKey, type MetricKeyType, MetricLabel } from "effect"
import { readdirSync } from "node:fs"
import { drainingGauge } from "../Lifecycle.js"

/** The extra labels of every update here: none, and one array for all (a literal `[]` is a new array per update). */
const NO_TAGS: ReadonlyArray<MetricLabel.MetricLabel> = []

/** Buckets from 1 ms (petstore answers in a few) to 10 s, the semantic conventions' with two finer ones below 5 ms. */
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]
const STATEMENT_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]

/** One series of a metric: the metric of its tagged key, whose hook is looked up once and then kept. */
const series = <Type extends MetricKeyType.MetricKeyType.Untyped>(
  key: MetricKey.MetricKey<Type>,
  labels: Record<string, string>
) =>
  Metric.fromMetricKey(
    MetricKey.taggedWithLabels(key, Object.entries(labels).map(([name, value]) => MetricLabel.make(name, value)))
  )

/**
 * The series of a histogram by their label values, each made once: looking a series up in the registry on every update
 * (what `Metric.tagged` does) costs the hot path; a map of the series already made does not.
 */
const histogramSeries = (key: MetricKey.MetricKey<MetricKeyType.MetricKeyType.Histogram>) => {
  const made = new Map<string, Metric.Metric<MetricKeyType.MetricKeyType.Histogram, number, unknown>>()
  return (labels: Record<string, string>) => {
    const id = Object.values(labels).join(" ")
    let histogram = made.get(id)
    if (histogram === undefined) {
      histogram = series(key, labels)
      made.set(id, histogram)
    }
    return histogram
  }
}

const requestDurationKey = MetricKey.histogram(
  "http_server_request_duration_seconds",
  MetricBoundaries.fromIterable(REQUEST_BUCKETS),
  "Duration of HTTP server requests, by method, route and status"
)

export const requestsInFlight = Metric.gauge("http_server_active_requests", {
  description: "HTTP requests being answered"
})

const statementDurationKey = MetricKey.histogram(
  "db_client_operation_duration_seconds",
  MetricBoundaries.fromIterable(STATEMENT_BUCKETS),
  "Duration of database statements, by database system, operation and table"
)

export const buildInfo = Metric.gauge("petstore_build_info", { description: "Always 1; the version is a label" })

export const spansExported = Metric.counter("petstore_otel_spans_exported_total", {
  description: "Spans the OTLP collector accepted"
})

export const spansDropped = Metric.counter("petstore_otel_spans_dropped_total", {
  description: "Spans dropped: the export buffer was full, or the collector did not take them"
})

// ------------------------------------------------------------------------------------------------------------ requests

/** The methods the semantic conventions name; any other is `_OTHER` (a client does not get to choose label values). */
const KNOWN_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"])

export const methodLabel = (method: string): string => (KNOWN_METHODS.has(method) ? method : "_OTHER")

const requestDurations = histogramSeries(requestDurationKey)

export type RequestRecorder = (status: number, seconds: number) => void

const requestRecorders = new Map<string, Map<string, RequestRecorder>>()

/**
 * What records the answered requests of one method and route (`/v1/pets/{petId}`, `""` when no route matched), made
 * once per pair: the series by status are kept, so recording a request builds no labels.
 */
export const requestRecorder = (method: string, route: string): RequestRecorder => {
  let byRoute = requestRecorders.get(method)
  if (byRoute === undefined) requestRecorders.set(method, byRoute = new Map())
  let recorder = byRoute.get(route)
  if (recorder === undefined) {
    const byStatus = new Map<number, ReturnType<typeof requestDurations>>()
    recorder = (status, seconds) => {
      let histogram = byStatus.get(status)
      if (histogram === undefined) {
        histogram = requestDurations({
          http_request_method: method,
          http_route: route,
          http_response_status_code: String(status)
        })
        byStatus.set(status, histogram)
      }
      histogram.unsafeUpdate(seconds, NO_TAGS)
    }
    byRoute.set(route, recorder)
  }
  return recorder
}

export const addInFlight = (delta: number): void => requestsInFlight.unsafeModify(delta, NO_TAGS)

// ---------------------------------------------------------------------------------------------------------- statements

const statementDurations = histogramSeries(statementDurationKey)

const statementSeries = new WeakMap<object, ReturnType<typeof statementDurations>>()

/** One statement's duration. Its series is found by the statement's description, made once per description. */
export const recordStatement = (
  statement: { readonly system: string; readonly operation: string; readonly collection: string },
  seconds: number
): void => {
  let histogram = statementSeries.get(statement)
  if (histogram === undefined) {
    histogram = statementDurations({
      db_system_name: statement.system,
      db_operation_name: statement.operation,
      db_collection_name: statement.collection
    })
    statementSeries.set(statement, histogram)
  }
  histogram.unsafeUpdate(seconds, NO_TAGS)
}

// --------------------------------------------------------------------------------------------------------------- pools

const connections = MetricKey.gauge("db_client_connection_count", { description: "Connections of the pool, by state" })
const idleConnections = series(connections, { db_client_connection_state: "idle" })
const usedConnections = series(connections, { db_client_connection_state: "used" })
const pendingRequests = Metric.gauge("db_client_connection_pending_requests", {
  description: "Requests waiting for a connection of the pool"
})
const maxConnections = Metric.gauge("db_client_connection_max", { description: "The most connections the pool opens" })

/** Reports the pool's state at each refresh; returns the stop. */
export const addPool = (pool: { totalCount: number; idleCount: number; waitingCount: number }, max: number) => {
  maxConnections.unsafeUpdate(max, NO_TAGS)
  return addCollector(() => {
    idleConnections.unsafeUpdate(pool.idleCount, NO_TAGS)
    usedConnections.unsafeUpdate(pool.totalCount - pool.idleCount, NO_TAGS)
    pendingRequests.unsafeUpdate(pool.waitingCount, NO_TAGS)
  })
}

// ------------------------------------------------------------------------------------------------------------- process

const residentMemory = Metric.gauge("process_resident_memory_bytes", { description: "Resident memory size" })
const cpuSeconds = Metric.counter("process_cpu_seconds_total", { description: "User and system CPU time spent" })
const openFds = Metric.gauge("process_open_fds", { description: "Open file descriptors" })
const startTime = Metric.gauge("process_start_time_seconds", { description: "Start time, seconds since the epoch" })
const eventLoopDelay = Metric.gauge("petstore_event_loop_delay_seconds", {
  description: "The longest delay of a timer over the last 5 s: how long the event loop was kept from its next turn"
})

/** Extra figures read at each refresh (the PostgreSQL pool's state registers here). */
const collectors = new Set<() => void>()

export const addCollector = (collect: () => void): () => void => {
  collectors.add(collect)
  return () => collectors.delete(collect)
}

let cpuMicrosSeen = 0

/** Reads the process figures into their gauges; called before the registry is read. */
export const refreshProcessMetrics = (): void => {
  residentMemory.unsafeUpdate(process.memoryUsage.rss(), NO_TAGS)
  const cpu = process.cpuUsage()
  const cpuMicros = cpu.user + cpu.system
  cpuSeconds.unsafeUpdate((cpuMicros - cpuMicrosSeen) / 1e6, NO_TAGS)
  cpuMicrosSeen = cpuMicros
  try {
    openFds.unsafeUpdate(readdirSync("/proc/self/fd").length - 1, NO_TAGS) // less the one reading the directory
  } catch {
    // not Linux: no figure
  }
  for (const collect of collectors) collect()
}

const SAMPLE_EVERY_MS = 100
const WINDOW_SAMPLES = 50

/**
 * Starts the metrics that need starting: the build info, the start time and the event-loop delay sampler (a timer
 * every 100 ms that measures how late it fires; it does not keep the process alive). Returns its stop.
 */
export const startProcessMetrics = (version: string): () => void => {
  buildInfo.pipe(Metric.tagged("version", version)).unsafeUpdate(1, NO_TAGS)
  startTime.unsafeUpdate(Math.round(Date.now() / 1000 - process.uptime()), NO_TAGS)
  drainingGauge.unsafeModify(0, NO_TAGS) // registered, and 0 unless the drain has started
  requestsInFlight.unsafeUpdate(0, NO_TAGS)
  eventLoopDelay.unsafeUpdate(0, NO_TAGS) // registered from the start; the first window's figure comes after 5 s
  let expected = performance.now() + SAMPLE_EVERY_MS
  let worst = 0
  let samples = 0
  const timer = setInterval(() => {
    const now = performance.now()
    worst = Math.max(worst, now - expected)
    expected = now + SAMPLE_EVERY_MS
    if (++samples === WINDOW_SAMPLES) {
      eventLoopDelay.unsafeUpdate(worst / 1000, NO_TAGS)
      worst = 0
      samples = 0
    }
  }, SAMPLE_EVERY_MS)
  timer.unref()
  return () => clearInterval(timer)
}
