/**
 * The service's metrics, in Effect's metric registry: `/metrics` renders it (`MetricsServer.ts`), `OtlpMetrics` exports
 * it. The names are the OpenTelemetry semantic conventions' as a Prometheus exporter spells them. Each series (a set of
 * label values) is found in the registry once and then updated with `unsafeUpdate`: `Metric.tagged` would hash a new
 * key at every update, which costs a get one with metrics on more than 10 % (`npm run bench:cpu`).
 */
import { Metric, MetricBoundaries, MetricKey, type MetricKeyType, MetricLabel } from "effect"
import { readdirSync } from "node:fs"
import { drainingGauge } from "../Operations/Lifecycle.js"
import type { PoolState, Statement } from "./Hooks.js"
import type { SpanCounts } from "./OtlpSpanCounts.js"

const NO_TAGS: ReadonlyArray<MetricLabel.MetricLabel> = []

const series = <Type extends MetricKeyType.MetricKeyType.Untyped>(
  key: MetricKey.MetricKey<Type>,
  labels: Record<string, string>
) =>
  Metric.fromMetricKey(MetricKey.taggedWithLabels(key, Object.entries(labels).map(([k, v]) => MetricLabel.make(k, v))))

/** `make(key)`, made once for each key. */
export const memo = <K, V>(make: (key: K) => V) => {
  const made = new Map<K, V>()
  return (key: K): V => {
    let value = made.get(key)
    if (value === undefined) made.set(key, value = make(key))
    return value
  }
}

/** Buckets from 1 ms to 10 s for requests (the semantic conventions', two finer ones below 5 ms), 0.1 ms to 5 s. */
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]
const STATEMENT_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]
const requestDuration = MetricKey.histogram(
  "http_server_request_duration_seconds",
  MetricBoundaries.fromIterable(REQUEST_BUCKETS),
  "Duration of HTTP server requests, by method, route and status"
)
const statementDuration = MetricKey.histogram(
  "db_client_operation_duration_seconds",
  MetricBoundaries.fromIterable(STATEMENT_BUCKETS),
  "Duration of database statements, by database system, operation and table"
)
const requestsInFlight = Metric.gauge("http_server_active_requests", { description: "HTTP requests being answered" })

/** Seconds from `started` (a `performance.now()`) to now. */
const secondsSince = (started: number) => (performance.now() - started) / 1000

/** What records the durations of requests of one method and route (`""`: none matched), by status. */
export const requestRecorder = memo((method: string) =>
  memo((route: string) => {
    const byStatus = memo((status: number) =>
      series(requestDuration, {
        http_request_method: method,
        http_route: route,
        http_response_status_code: `${status}`
      })
    )
    return (status: number, started: number) => byStatus(status).unsafeUpdate(secondsSince(started), NO_TAGS)
  })
)
export type RequestRecorder = ReturnType<ReturnType<typeof requestRecorder>>

export const addInFlight = (delta: number): void => requestsInFlight.unsafeModify(delta, NO_TAGS)

/** By the statement's description, which the repositories make once per statement. */
const statementSeries = memo(({ collection, operation, system }: Statement) =>
  series(statementDuration, { db_system_name: system, db_operation_name: operation, db_collection_name: collection })
)

export const recordStatement = (statement: Statement, started: number): void =>
  statementSeries(statement).unsafeUpdate(secondsSince(started), NO_TAGS)

const connections = MetricKey.gauge("db_client_connection_count", { description: "Connections of the pool, by state" })
const idleConnections = series(connections, { db_client_connection_state: "idle" })
const usedConnections = series(connections, { db_client_connection_state: "used" })
const pendingRequests = Metric.gauge("db_client_connection_pending_requests", {
  description: "Requests waiting for a connection of the pool"
})
const maxConnections = Metric.gauge("db_client_connection_max", { description: "The most connections the pool opens" })
const buildInfo = Metric.gauge("petstore_build_info", { description: "Always 1; the version is a label" })
const residentMemory = Metric.gauge("process_resident_memory_bytes", { description: "Resident memory size" })
const cpuSeconds = Metric.counter("process_cpu_seconds_total", { description: "User and system CPU time spent" })
const openFds = Metric.gauge("process_open_fds", { description: "Open file descriptors" })
const startTime = Metric.gauge("process_start_time_seconds", { description: "Start time, seconds since the epoch" })
const eventLoopDelay = Metric.gauge("petstore_event_loop_delay_seconds", {
  description: "The longest delay of a timer over the last 5 s: how long the event loop was kept from its next turn"
})

const spansExported = Metric.counter("petstore_otel_spans_exported_total", {
  description: "Spans the OTLP collector took (answered their batch with a 2xx)"
})
const spansDropped = Metric.counter("petstore_otel_spans_dropped_total", {
  description:
    "Spans that never reach the OTLP collector: their batch failed for good, or the paused exporter refused them"
})
const spansQueued = Metric.gauge("petstore_otel_spans_queued", {
  description: "Ended spans neither exported nor dropped yet: waiting for their batch, or being sent"
})

/** The scheduled backups (`Database/ScheduledBackups.ts`), registered when they are on. */
export const backupLastSuccess = Metric.gauge("petstore_backup_last_success_timestamp_seconds", {
  description: "When the last scheduled backup was written, seconds since the epoch; at start, the newest in BACKUP_DIR"
})
export const backupFailures = Metric.counter("petstore_backup_failures_total", {
  description: "Scheduled backups that failed"
})
export const backupDuration = Metric.gauge("petstore_backup_duration_seconds", {
  description: "How long the last scheduled backup that was written took"
})

/** What reads the pools' states and the span counts into their metrics, run at each refresh. */
const collectors = new Set<() => void>()

/** Reports the pool's state at each refresh; returns the stop. */
export const addPool = (pool: PoolState, max: number) => {
  maxConnections.unsafeUpdate(max, NO_TAGS)
  const collect = () => {
    idleConnections.unsafeUpdate(pool.idleCount, NO_TAGS)
    usedConnections.unsafeUpdate(pool.totalCount - pool.idleCount, NO_TAGS)
    pendingRequests.unsafeUpdate(pool.waitingCount, NO_TAGS)
  }
  collectors.add(collect)
  return () => collectors.delete(collect)
}

/**
 * Adds the span exporter's counts (`OtlpSpanCounts.ts`, plain numbers) to their metrics at each refresh, from 0 at
 * once; returns the stop, which adds the last of them and takes the exporter's queue out of the gauge.
 */
export const addSpanCounts = (counts: SpanCounts) => {
  let exported = 0
  let dropped = 0
  let queued = 0
  const collect = () => {
    spansExported.unsafeUpdate(counts.exported - exported, NO_TAGS)
    spansDropped.unsafeUpdate(counts.dropped - dropped, NO_TAGS)
    spansQueued.unsafeModify(counts.queued - queued, NO_TAGS)
    ;({ dropped, exported, queued } = counts)
  }
  collect()
  collectors.add(collect)
  return () => {
    collect()
    collectors.delete(collect)
    spansQueued.unsafeModify(-queued, NO_TAGS)
  }
}

let cpuMicrosSeen = 0

/** Reads the process figures, the pools' states and the span counts into their metrics: before the registry is read. */
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
 * Starts the figures known at start and the event-loop delay (a timer every 100 ms that measures how late it fires, the
 * worst of 50 kept; it does not keep the process alive). Returns the stop.
 */
export const startProcessMetrics = (version: string): () => void => {
  buildInfo.pipe(Metric.tagged("version", version)).unsafeUpdate(1, NO_TAGS)
  startTime.unsafeUpdate(Math.round(Date.now() / 1000 - process.uptime()), NO_TAGS)
  // Registered from the start, at 0: the drain, the requests in flight, the delay (its first figure comes after 5 s).
  drainingGauge.unsafeModify(0, NO_TAGS)
  requestsInFlight.unsafeUpdate(0, NO_TAGS)
  eventLoopDelay.unsafeUpdate(0, NO_TAGS)
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
