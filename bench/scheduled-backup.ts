/**
 * `bun bench/scheduled-backup.ts`: how long a server's own scheduled backup (`BACKUP_EVERY`) holds its event loop. One
 * `dist/petstore serve` on a seeded catalogue takes creates from BENCH_CONNECTIONS keep-alive clients, in two phases
 * of the same length: no backup, then `BACKUP_EVERY=1s` (a backup of a million pets takes longer than that, so they
 * run back to back for the whole phase). Each phase reports creates per second, p50, p99 and the slowest create, and
 * the worst `petstore_event_loop_delay_seconds` scraped (the longest a 100 ms timer fired late, over 5 s windows). For
 * scale, the time one `VACUUM INTO` of the same catalogue takes, which is how long an unpaced copy would hold the loop.
 * Then, in this process with no other load, the scheduled copy (`SCHEDULED_PACE`) against a timer every millisecond:
 * how late it fires while the copy runs, and for 3 s without it (what the machine itself adds).
 *
 * Environment: BENCH_PETS (1000000), BENCH_DURATION (seconds per phase, 20), BENCH_CONNECTIONS (8),
 * BENCH_SKIP_BUILD=1. Prints JSON lines; the results go in bench/results by hand.
 */
import { BunContext } from "@effect/platform-bun"
import { spawn, spawnSync } from "bun"
import { Database } from "bun:sqlite"
import { Effect, Redacted } from "effect"
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { cpus, tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { backup } from "../src/Database/Backup.js"
import { SCHEDULED_PACE } from "../src/Database/ScheduledBackups.js"
import { createKey, insertPets } from "./seed.js"
import { median } from "./stats.js"

const ROOT = resolve(import.meta.dir, "..")
const PETSTORE = join(ROOT, "dist", "petstore")
const PETS = Number(process.env.BENCH_PETS ?? 1_000_000)
const DURATION = Number(process.env.BENCH_DURATION ?? 20)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 8)

const log = (line: string) => console.error(`[bench:scheduled-backup] ${line}`)

const freePort = () => {
  const socket = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
  const port = socket.port
  socket.stop(true)
  return port
}

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]

const round = (millis: number) => Math.round(millis * 10) / 10

/** How late a timer set every millisecond fires while `run` runs (ms): median, p99, p99.9, the worst. */
const lateness = async (what: string, run: () => Promise<unknown>) => {
  const late: Array<number> = []
  let expected = performance.now() + 1
  const timer = setInterval(() => {
    const now = performance.now()
    late.push(now - expected)
    expected = now + 1
  }, 1)
  const started = performance.now()
  await run()
  const took = performance.now() - started
  clearInterval(timer)
  const sorted = late.sort((a, b) => a - b)
  return {
    what,
    tookMs: Math.round(took),
    p50: round(percentile(sorted, 0.5)),
    p99: round(percentile(sorted, 0.99)),
    p999: round(percentile(sorted, 0.999)),
    max: round(sorted[sorted.length - 1])
  }
}

const phase = async (name: string, db: string, key: string, env: Record<string, string>) => {
  const port = freePort()
  const metricsPort = freePort()
  const origin = `http://127.0.0.1:${port}`
  const server = spawn([PETSTORE, "serve"], {
    env: {
      ...process.env,
      HOST: "127.0.0.1",
      PORT: String(port),
      DATABASE_URL: db,
      METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
      LOG_LEVEL: "warning",
      SHUTDOWN_DELAY: "0",
      ...env
    },
    stdout: "ignore",
    stderr: "inherit"
  })
  for (let attempt = 0; !(await fetch(`${origin}/healthz`).then((r) => r.ok, () => false)); attempt++) {
    if (attempt > 400) throw new Error("the server did not start")
    await Bun.sleep(50)
  }
  const worstDelay: Array<number> = []
  const backupsSeen = new Map<number, number>()
  const scrape = setInterval(async () => {
    const text = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text(), () => "")
    const value = (name: string) => {
      const line = text.split("\n").find((line) => line.startsWith(`${name} `))
      return line === undefined ? undefined : Number(line.split(" ")[1])
    }
    const delay = value("petstore_event_loop_delay_seconds")
    if (delay !== undefined) worstDelay.push(delay * 1000)
    const last = value("petstore_backup_last_success_timestamp_seconds")
    const took = value("petstore_backup_duration_seconds")
    if (last !== undefined && last > 0 && took !== undefined) backupsSeen.set(last, took * 1000)
  }, 1000)
  const latencies: Array<number> = []
  let errors = 0
  const ends = performance.now() + DURATION * 1000
  await Promise.all(Array.from({ length: CONNECTIONS }, async (_, c) => {
    for (let i = 0; performance.now() < ends; i++) {
      const started = performance.now()
      const response = await fetch(`${origin}/v1/pets`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ name: `bench ${c} ${i}`, categoryId: 1 + i % 50 })
      })
      await response.arrayBuffer()
      if (response.status !== 201) errors++
      latencies.push(performance.now() - started)
    }
  }))
  clearInterval(scrape)
  server.kill("SIGTERM")
  await server.exited
  const sorted = latencies.sort((a, b) => a - b)
  return {
    phase: name,
    creates: latencies.length,
    rps: Math.round(latencies.length / DURATION),
    p50: round(percentile(sorted, 0.5)),
    p99: round(percentile(sorted, 0.99)),
    max: round(sorted[sorted.length - 1]),
    errors,
    worstEventLoopDelayMs: round(Math.max(0, ...worstDelay)),
    medianEventLoopDelayMs: round(median(worstDelay)),
    backupsSeen: backupsSeen.size,
    backupMedianMs: backupsSeen.size === 0 ? 0 : round(median([...backupsSeen.values()]))
  }
}

const main = async () => {
  if (process.env.BENCH_SKIP_BUILD !== "1" || !existsSync(PETSTORE)) {
    if (spawnSync(["npm", "run", "build"], { cwd: ROOT, stdout: "ignore", stderr: "inherit" }).exitCode !== 0) {
      throw new Error("npm run build failed")
    }
  }
  const data = mkdtempSync(join(tmpdir(), "petstore-bench-scheduled-backup-"))
  try {
    const db = join(data, "petstore.db")
    const key = createKey([PETSTORE], db, "bench", data)
    log(`seeding ${PETS} pets`)
    insertPets(db, PETS)
    const source = new Database(db, { readonly: true })
    const started = performance.now()
    source.run("VACUUM INTO ?", [join(data, "vacuum.db")])
    const vacuumIntoMs = round(performance.now() - started)
    source.close()
    rmSync(join(data, "vacuum.db"))
    console.log(JSON.stringify({
      date: new Date().toISOString(),
      machine: { cpus: cpus().length, cpu: cpus()[0]?.model ?? "unknown", bun: Bun.version },
      pets: PETS,
      vacuumIntoMs
    }))
    log("phase: no backup")
    console.log(JSON.stringify(await phase("no backup", db, key, {})))
    log("phase: BACKUP_EVERY=1s")
    const backups = join(data, "backups")
    const result = await phase("BACKUP_EVERY=1s", db, key, { BACKUP_EVERY: "1s", BACKUP_DIR: backups })
    console.log(JSON.stringify({ ...result, backupsKept: readdirSync(backups).length }))
    console.log(JSON.stringify(await lateness("timer, 3 s, nothing else", () => Bun.sleep(3000))))
    const paced = backup({
      database: Redacted.make(db),
      file: join(data, "paced.db"),
      force: false,
      pace: SCHEDULED_PACE
    })
    console.log(JSON.stringify(
      await lateness(
        "timer, during the scheduled copy",
        () => Effect.runPromise(Effect.provide(paced, BunContext.layer))
      )
    ))
  } finally {
    rmSync(data, { recursive: true, force: true })
  }
}

await main()
