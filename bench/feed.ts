/**
 * `npm run bench:feed` (also run by `npm run bench`, as its feed rows): the change feed's event streams
 * (`GET /v1/pets/changes`, `Accept: text/event-stream`) followed by BENCH_FEED_SUBSCRIBERS (1 000) subscribers on one
 * server, measured two ways:
 *
 * - memory: the server's resident memory (VmRSS) before they connect and once they are connected and have sat idle for
 *   BENCH_FEED_SETTLE seconds, the difference divided by their number;
 * - delivery: pets created at BENCH_FEED_RATE (50) a second for BENCH_FEED_SECONDS (10), sent on a fixed schedule
 *   (not one after the other's answer), and for every pet and every subscriber the time from the create's 201 to the
 *   event's arrival (an event that comes before its 201 counts 0; one that has not come DRAIN_MS after the last 201
 *   counts as never), and from the request's sending; p50, p99, max.
 *
 * On SQLite, one server. On PostgreSQL (BENCH_DATABASE_URL, else TEST_DATABASE_URL: a server where the bench may create
 * a database, dropped after), two replicas of one database: the creates go to one, the subscribers follow the other,
 * so a delivery includes the other replica's noticing the commit. Without either URL those rows are skipped.
 *
 * The subscribers are a process of their own (`bench/feed-subscribers.ts`): raw TCP connections (`Bun.connect`) with
 * the `GET` written by hand, their bytes scanned only for a block's end and a created event's pet id, so that the
 * client takes little CPU from the server it measures (it is reported beside the server's). This process sends the
 * creates and times them; both read the same clock (milliseconds since the epoch, `performance.timeOrigin +
 * performance.now()`), so an arrival there is compared with a 201 here. Every subscriber must have every pet's event
 * once, and nothing else than the `retry:` hint and heartbeats must come: what else comes (a block, an event a second
 * time, a stream the server ended) is listed.
 *
 * Create throughput with nobody following the feed is the `create` row of `npm run bench` (against the previous build
 * with BENCH_PREVIOUS_REF), not measured here.
 *
 * Environment: BENCH_FEED_SUBSCRIBERS (1000), BENCH_FEED_RATE (50), BENCH_FEED_SECONDS (10), BENCH_FEED_SETTLE (5),
 * BENCH_DATABASE_URL / TEST_DATABASE_URL, BENCH_SKIP_BUILD=1. Prints a table and writes bench/results/feed.json and
 * bench/results/feed.md (not committed).
 */
import { spawn, spawnSync } from "bun"
import { randomBytes } from "node:crypto"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { cpus, tmpdir, totalmem } from "node:os"
import { dirname, join, resolve } from "node:path"
import { openSse } from "../test/system/support/sse.js"
import { cpuTicks } from "./proc.js"
import { createKey } from "./seed.js"
import { median } from "./stats.js"

const ROOT = resolve(import.meta.dir, "..")
const RESULTS = join(ROOT, "bench", "results")
const PETSTORE = join(ROOT, "dist", "petstore")

const SUBSCRIBERS = Number(process.env.BENCH_FEED_SUBSCRIBERS ?? 1_000)
const RATE = Number(process.env.BENCH_FEED_RATE ?? 50)
const SECONDS = Number(process.env.BENCH_FEED_SECONDS ?? 10)
const SETTLE = Number(process.env.BENCH_FEED_SETTLE ?? 5)
const POSTGRES = process.env.BENCH_DATABASE_URL || process.env.TEST_DATABASE_URL || undefined
/** Subscribers connecting at once. */
const CONNECT_BATCH = 50
/** How long the bench waits, after the last create's 201, for the last deliveries. */
const DRAIN_MS = 5_000
/** A create not answered within this is counted as failed. */
const CREATE_TIMEOUT_MS = 30_000

/** The targets the rows are read against. */
const TARGETS = { idleKiB: 16, p99SqliteMs: 50, p99PostgresMs: 250 }

const log = (line: string) => console.error(`[bench:feed] ${line}`)

const freePort = () => {
  const socket = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
  const port = socket.port
  socket.stop(true)
  return port
}

/** Milliseconds since the epoch, to a fraction: the clock of both the bench's processes. */
const now = () => performance.timeOrigin + performance.now()

const rssKiB = (pid: number): number =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN)

/** The p-th percentile (0 to 100) of sorted values, by the nearest rank. */
const percentile = (sorted: Float64Array, p: number) =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]

const tenths = (value: number) => Math.round(value * 10) / 10

interface Server {
  readonly origin: string
  readonly pid: number
  readonly stop: () => Promise<void>
}

/** `petstore serve` on a free port, once /readyz answers 200. */
const start = async (database: string): Promise<Server> => {
  const port = freePort()
  const origin = `http://127.0.0.1:${port}`
  const child = spawn([PETSTORE, "serve"], {
    cwd: ROOT,
    env: {
      ...process.env,
      HOST: "127.0.0.1",
      PORT: String(port),
      DATABASE_URL: database,
      LOG_LEVEL: "warning",
      SHUTDOWN_DELAY: "0",
      FEED_STREAMS_PER_KEY: String(SUBSCRIBERS + 100)
    },
    stdout: "ignore",
    stderr: "inherit"
  })
  for (let attempt = 0; !(await fetch(`${origin}/readyz`).then((r) => r.ok, () => false)); attempt++) {
    if (child.exitCode !== null || attempt > 600) throw new Error(`petstore serve did not start (${child.exitCode})`)
    await Bun.sleep(50)
  }
  return {
    origin,
    pid: child.pid,
    stop: async () => {
      child.kill("SIGTERM")
      if (await Promise.race([child.exited, Bun.sleep(5_000).then(() => "late" as const)]) === "late") {
        child.kill("SIGKILL")
      }
    }
  }
}

/** The subscribers' process (`bench/feed-subscribers.ts`), once every stream is open. */
interface Subscribers {
  readonly pid: number
  /** The pets every subscriber has had. */
  readonly complete: ReadonlySet<number>
  /** Cuts the streams: each pet's arrival times (ms since the epoch, NaN: never), and what else came. */
  readonly stop: () => Promise<{
    readonly arrivals: ReadonlyMap<number, Float64Array>
    readonly unexpected: ReadonlyArray<string>
  }>
}

/** SUBSCRIBERS streams from `now` on `origin`, in a process of their own. */
const subscribe = async (origin: string, key: string): Promise<Subscribers> => {
  const results = join(mkdtempSync(join(tmpdir(), "petstore-bench-feed-subscribers-")), "arrivals")
  const child = spawn([process.execPath, join(import.meta.dir, "feed-subscribers.ts")], {
    env: {
      ...process.env,
      FEED_ORIGIN: origin,
      FEED_KEY: key,
      FEED_SUBSCRIBERS: String(SUBSCRIBERS),
      FEED_CONNECT_BATCH: String(CONNECT_BATCH),
      FEED_RESULTS: results
    },
    stdin: "pipe",
    stdout: "pipe",
    stderr: "inherit"
  })
  const complete = new Set<number>()
  let ready!: () => void
  let done!: () => void
  let failed!: (error: Error) => void
  const isReady = new Promise<void>((resolve, reject) => {
    ready = resolve
    failed = reject
  })
  const isDone = new Promise<void>((resolve) => done = resolve)
  void (async () => {
    const decoder = new TextDecoder()
    let carry = ""
    for await (const bytes of child.stdout) {
      carry += decoder.decode(bytes, { stream: true })
      let end = carry.indexOf("\n")
      while (end !== -1) {
        const line = carry.slice(0, end)
        carry = carry.slice(end + 1)
        if (line.startsWith("all ")) complete.add(Number(line.slice(4)))
        else if (line === "ready") ready()
        else if (line === "done") done()
        else if (line.startsWith("failed ")) failed(new Error(line.slice(7)))
        end = carry.indexOf("\n")
      }
    }
    failed(new Error(`the subscribers' process ended (${await child.exited})`))
  })()
  await isReady
  return {
    pid: child.pid,
    complete,
    stop: async () => {
      child.stdin.write("stop\n")
      await child.stdin.flush()
      await isDone
      await child.exited
      const file = readFileSync(results)
      rmSync(dirname(results), { recursive: true, force: true })
      const newline = file.indexOf(10)
      const header = JSON.parse(file.subarray(0, newline).toString("utf8")) as {
        readonly pets: number
        readonly unexpected: ReadonlyArray<string>
      }
      const bytes = file.subarray(newline + 1)
      const times = new Float64Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength))
      const arrivals = new Map<number, Float64Array>()
      for (let row = 0; row < header.pets; row++) {
        const at = row * (1 + SUBSCRIBERS)
        arrivals.set(times[at], times.subarray(at + 1, at + 1 + SUBSCRIBERS))
      }
      return { arrivals, unexpected: header.unexpected }
    }
  }
}

interface FeedRun {
  readonly backend: string
  readonly subscribers: number
  readonly rssBeforeMiB: number
  readonly rssIdleMiB: number
  readonly idleKiBPerSubscriber: number
  readonly creates: number
  readonly createErrors: number
  readonly createP50Ms: number
  readonly createP99Ms: number
  readonly deliveriesExpected: number
  readonly deliveriesMissing: number
  readonly deliveriesBefore201: number
  readonly deliveriesPerSecond: number
  /** From the 201 to the event's arrival (0 when the event came first). */
  readonly fromAck: { readonly p50: number; readonly p99: number; readonly max: number }
  /** From the create's sending to the event's arrival. */
  readonly fromSend: { readonly p50: number; readonly p99: number; readonly max: number }
  /**
   * CPU during the creates, % of one core: of the subscribers' server (all threads), of the bench (both its
   * processes), and of its subscribers' process alone.
   */
  readonly serverCpuPercent: number
  readonly benchCpuPercent: number
  readonly subscribersCpuPercent: number
  readonly unexpected: ReadonlyArray<string>
}

/**
 * The memory and delivery figures: subscribers on `follow`, creates on `create` (the same server, or another replica
 * of the same database).
 */
const measure = async (backend: string, create: Server, follow: Server, key: string): Promise<FeedRun> => {
  // Warm both up: a few creates and lists, and a few streams opened and closed, so that the memory difference is
  // the streams' and not the first stream's code.
  for (let i = 0; i < 20; i++) {
    const made = await fetch(`${create.origin}/v1/pets`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ name: `warm-up ${i}`, categoryId: 1 })
    })
    await made.arrayBuffer()
    await (await fetch(`${follow.origin}/v1/pets?limit=20`, { headers: { authorization: `Bearer ${key}` } }))
      .arrayBuffer()
  }
  const warm = await Promise.all(
    Array.from(
      { length: 10 },
      () => openSse(`${follow.origin}/v1/pets/changes?after=start`, { headers: { authorization: `Bearer ${key}` } })
    )
  )
  await Bun.sleep(500)
  for (const stream of warm) stream.cut()
  await Bun.sleep(2_000)

  const rssBefore = rssKiB(follow.pid)
  log(`${backend}: ${SUBSCRIBERS} subscribers connecting (server RSS ${tenths(rssBefore / 1024)} MiB)`)
  const subscribers = await subscribe(follow.origin, key)
  await Bun.sleep(SETTLE * 1_000)
  const rssIdle = median([0, 1, 2].map(() => rssKiB(follow.pid)))
  log(`${backend}: connected and idle, server RSS ${tenths(rssIdle / 1024)} MiB; creating ${RATE}/s for ${SECONDS} s`)

  // The creates, on a fixed schedule.
  const acks = new Map<number, { readonly sent: number; readonly ack: number }>()
  const createTimes: Array<number> = []
  let createErrors = 0
  const inFlight: Array<Promise<void>> = []
  const ticks = cpuTicks(follow.pid, "all")
  const subscriberTicks = cpuTicks(subscribers.pid, "all")
  const cpu = process.cpuUsage()
  const began = now()
  for (let i = 0; i < RATE * SECONDS; i++) {
    const due = began + (i * 1_000) / RATE
    const wait = due - now()
    if (wait > 0) await Bun.sleep(wait)
    inFlight.push((async () => {
      const sent = now()
      try {
        const response = await fetch(`${create.origin}/v1/pets`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ name: `followed ${i}`, categoryId: 1 + (i % 50) }),
          signal: AbortSignal.timeout(CREATE_TIMEOUT_MS)
        })
        const body = await response.text()
        const ack = now()
        if (response.status !== 201) throw new Error(`${response.status} ${body.slice(0, 200)}`)
        acks.set((JSON.parse(body) as { readonly id: number }).id, { sent, ack })
        createTimes.push(ack - sent)
      } catch (error) {
        createErrors++
        if (createErrors <= 3) log(`a create failed: ${String(error)}`)
      }
    })())
  }
  await Promise.all(inFlight)
  const complete = () => [...acks.keys()].every((id) => subscribers.complete.has(id))
  const drainBy = now() + DRAIN_MS
  while (now() < drainBy && !complete()) await Bun.sleep(50)
  const elapsed = (now() - began) / 1_000
  const serverCpuPercent = Math.round(((cpuTicks(follow.pid, "all") - ticks) / 100 / elapsed) * 100)
  const used = process.cpuUsage(cpu)
  const subscribersCpuPercent = Math.round(((cpuTicks(subscribers.pid, "all") - subscriberTicks) / 100 / elapsed) * 100)
  const benchCpuPercent = Math.round(((used.user + used.system) / 1e6 / elapsed) * 100) + subscribersCpuPercent

  const { arrivals, unexpected } = await subscribers.stop()

  // A delivery that never came counts as the slowest (Infinity), so that the percentiles are of every delivery due.
  const fromAck = new Float64Array(acks.size * SUBSCRIBERS)
  const fromSend = new Float64Array(acks.size * SUBSCRIBERS)
  let count = 0
  let missing = 0
  let before201 = 0
  for (const [id, { ack, sent }] of acks) {
    const times = arrivals.get(id)
    for (let s = 0; s < SUBSCRIBERS; s++) {
      const at = times?.[s] ?? NaN
      if (Number.isNaN(at)) {
        missing++
        fromAck[count] = fromSend[count] = Infinity
      } else {
        if (at < ack) before201++
        fromAck[count] = Math.max(0, at - ack)
        fromSend[count] = at - sent
      }
      count++
    }
  }
  const stats = (values: Float64Array) => {
    const sorted = values.sort()
    return {
      p50: tenths(percentile(sorted, 50)),
      p99: tenths(percentile(sorted, 99)),
      max: tenths(sorted[sorted.length - 1] ?? NaN)
    }
  }
  const sortedCreates = Float64Array.from(createTimes).sort()
  return {
    backend,
    subscribers: SUBSCRIBERS,
    rssBeforeMiB: tenths(rssBefore / 1024),
    rssIdleMiB: tenths(rssIdle / 1024),
    idleKiBPerSubscriber: tenths((rssIdle - rssBefore) / SUBSCRIBERS),
    creates: acks.size,
    createErrors,
    createP50Ms: tenths(percentile(sortedCreates, 50)),
    createP99Ms: tenths(percentile(sortedCreates, 99)),
    deliveriesExpected: acks.size * SUBSCRIBERS,
    deliveriesMissing: missing,
    deliveriesBefore201: before201,
    deliveriesPerSecond: Math.round((count - missing) / SECONDS),
    fromAck: stats(fromAck),
    fromSend: stats(fromSend),
    serverCpuPercent,
    benchCpuPercent,
    subscribersCpuPercent,
    unexpected: unexpected.slice(0, 10)
  }
}

const onSqlite = async (): Promise<FeedRun> => {
  const data = mkdtempSync(join(tmpdir(), "petstore-bench-feed-"))
  try {
    const database = join(data, "petstore.db")
    const key = createKey([PETSTORE], database, "bench", data)
    const server = await start(database)
    try {
      return await measure("SQLite, one server", server, server, key)
    } finally {
      await server.stop()
    }
  } finally {
    rmSync(data, { recursive: true, force: true })
  }
}

/** Two replicas of a database made for the run on the PostgreSQL server of `url`, dropped after. */
const onPostgres = async (url: string): Promise<FeedRun> => {
  const name = `bench_feed_${randomBytes(6).toString("hex")}`
  const admin = new Bun.SQL(url)
  await admin.unsafe(`CREATE DATABASE ${name}`)
  const database = new URL(url)
  database.pathname = `/${name}`
  const servers: Array<Server> = []
  try {
    const key = createKey([PETSTORE], database.href, "bench", ROOT)
    // One after the other: the first migrates.
    servers.push(await start(database.href))
    servers.push(await start(database.href))
    return await measure("PostgreSQL, creates on one replica, subscribers on the other", servers[0], servers[1], key)
  } finally {
    for (const server of servers) await server.stop()
    await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await admin.close()
  }
}

/** A latency figure, or what stands for a delivery that never came. */
const ms = (value: number) => Number.isFinite(value) ? String(value) : "never came"

const table = (runs: ReadonlyArray<FeedRun>, skipped: string | undefined): string => {
  const row = (label: string, cell: (run: FeedRun) => string | number, target: string) =>
    `| ${label} | ${runs.map(cell).join(" | ")} | ${target} |`
  const lines = [
    `| feed: ${SUBSCRIBERS} subscribers on one server | ${runs.map((run) => run.backend).join(" | ")} | target |`,
    `|---|${runs.map(() => "---|").join("")}---|`,
    row(
      "RSS per idle subscriber (KiB): (connected − before) ÷ subscribers",
      (r) => `**${r.idleKiBPerSubscriber}** (${r.rssBeforeMiB} → ${r.rssIdleMiB} MiB)`,
      `≤ ${TARGETS.idleKiB}`
    ),
    row(
      `delivery from the 201, p50 / p99 / max (ms), ${RATE} creates/s`,
      (r) => `${ms(r.fromAck.p50)} / **${ms(r.fromAck.p99)}** / ${ms(r.fromAck.max)}`,
      `p99 ≤ ${TARGETS.p99SqliteMs} on SQLite, ≤ ${TARGETS.p99PostgresMs} across PostgreSQL replicas`
    ),
    row(
      "delivery from the create's sending, p50 / p99 / max (ms)",
      (r) => `${ms(r.fromSend.p50)} / ${ms(r.fromSend.p99)} / ${ms(r.fromSend.max)}`,
      ""
    ),
    row(
      "deliveries made ÷ the seconds of creates; missing; before their 201",
      (r) => `${r.deliveriesPerSecond}; ${r.deliveriesMissing} of ${r.deliveriesExpected}; ${r.deliveriesBefore201}`,
      "no missing"
    ),
    row(
      "creates: acknowledged, failed; 201 p50 / p99 (ms)",
      (r) => `${r.creates}, ${r.createErrors}; ${r.createP50Ms} / ${r.createP99Ms}`,
      ""
    ),
    row(
      "CPU while creating, % of a core: the subscribers' server; the bench (its subscribers' process)",
      (r) => `${r.serverCpuPercent}; ${r.benchCpuPercent} (subscribers ${r.subscribersCpuPercent})`,
      ""
    ),
    row("anything else on the streams", (r) => r.unexpected.length === 0 ? "none" : r.unexpected.join("<br>"), "none")
  ]
  if (skipped !== undefined) lines.push("", skipped)
  lines.push(
    "",
    "Create throughput with nobody following the feed: the `create` row of `npm run bench`, and its row against the " +
      "previous build (`BENCH_PREVIOUS_REF`)."
  )
  return lines.join("\n")
}

const main = async () => {
  if (process.env.BENCH_SKIP_BUILD !== "1" || !existsSync(PETSTORE)) {
    log("building dist/petstore")
    if (spawnSync(["npm", "run", "build"], { cwd: ROOT, stdout: "ignore", stderr: "inherit" }).exitCode !== 0) {
      throw new Error("npm run build failed")
    }
  }
  const runs = [await onSqlite()]
  const skipped = POSTGRES === undefined
    ? "PostgreSQL: not measured (set BENCH_DATABASE_URL or TEST_DATABASE_URL)."
    : undefined
  if (POSTGRES !== undefined) runs.push(await onPostgres(POSTGRES))
  const markdown = table(runs, skipped)
  const result = {
    date: new Date().toISOString(),
    commit: spawnSync(["git", "rev-parse", "--short", "HEAD"], { cwd: ROOT }).stdout.toString().trim(),
    machine: {
      cpu: `${cpus()[0]?.model ?? "?"} (${cpus().length} cores)`,
      memoryGb: Math.round(totalmem() / 2 ** 30),
      bun: Bun.version
    },
    settings: { subscribers: SUBSCRIBERS, rate: RATE, seconds: SECONDS, settle: SETTLE },
    targets: TARGETS,
    runs
  }
  mkdirSync(RESULTS, { recursive: true })
  writeFileSync(join(RESULTS, "feed.json"), JSON.stringify(result, null, 2) + "\n")
  writeFileSync(join(RESULTS, "feed.md"), markdown + "\n")
  console.log(markdown)
  console.log(
    `\n${result.machine.cpu}, ${result.machine.memoryGb} GB, Bun ${result.machine.bun}; commit ${result.commit}; ` +
      `JSON: bench/results/feed.json`
  )
}

await main()
