/**
 * `bun bench/backup.ts`: how much a backup slows a server that keeps serving. One `dist/petstore serve` on a seeded
 * catalogue, loaded by two wrk processes at once (lists of 20 pets, and creates), in three phases of the same length:
 * no backup, then backups taken back to back for the whole phase — `petstore backup` (SQLite's `VACUUM INTO`), then
 * `bun:sqlite`'s `serialize()` written to a file and synced (the other way to copy a live database from Bun). Each phase
 * reports throughput, p50, p99 and the longest answer of each load, and the backups taken and their median time.
 * Loopback only; the backup shares the machine with the server and wrk, as it would in production.
 *
 * The phases run in rounds, in an order reversed every round; the figures are the medians of the rounds.
 *
 * Environment: BENCH_PETS (1000000), BENCH_DURATION (seconds per phase, 10), BENCH_CONNECTIONS (per load, 8),
 * BENCH_ROUNDS (3), BENCH_SKIP_BUILD=1. Writes bench/results/backup.json.
 */
import { spawn, spawnSync } from "bun"
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { cpus, tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { createKey, insertPets } from "./seed.js"
import { median } from "./stats.js"

const ROOT = resolve(import.meta.dir, "..")
const PETSTORE = join(ROOT, "dist", "petstore")
const PETS = Number(process.env.BENCH_PETS ?? 1_000_000)
const DURATION = Number(process.env.BENCH_DURATION ?? 10)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 8)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)

const log = (line: string) => console.error(`[bench:backup] ${line}`)

/** The other way to copy a live database from Bun: one `serialize()` (a read transaction), written and synced. */
const SERIALIZE = `
import { Database } from "bun:sqlite"
import { closeSync, fsyncSync, openSync, renameSync, writeSync } from "node:fs"
const [source, target] = process.argv.slice(-2)
const db = new Database(source, { readonly: true })
const bytes = db.serialize()
db.close()
const fd = openSync(target + ".tmp", "w")
writeSync(fd, bytes)
fsyncSync(fd)
closeSync(fd)
renameSync(target + ".tmp", target)
`

const STRATEGIES: Record<string, (source: string, target: string) => Array<string>> = {
  "petstore backup (VACUUM INTO)": (source, target) => [PETSTORE, "backup", "--force", "--database", source, target],
  "bun:sqlite serialize()": (source, target) => [process.execPath, "-e", SERIALIZE, source, target]
}

const freePort = () => {
  const socket = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
  const port = socket.port
  socket.stop(true)
  return port
}

/** wrk's duration (`812.00us`, `1.20ms`, `1.01s`) in milliseconds. */
const millis = (text: string): number => {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(text)
  if (match === null) return NaN
  const factor = { us: 0.001, ms: 1, s: 1000, m: 60_000 }[match[2] as "us" | "ms" | "s" | "m"]
  return Math.round(Number(match[1]) * factor * 1000) / 1000
}

interface Load {
  readonly rps: number
  readonly p50: number
  readonly p99: number
  readonly max: number
  readonly errors: number
}

const wrk = async (url: string, key: string, script?: string): Promise<Load> => {
  const args = ["wrk", "-t1", `-c${CONNECTIONS}`, `-d${DURATION}s`, "--latency", "-H", `Authorization: Bearer ${key}`]
  if (script !== undefined) args.push("-s", script)
  const child = spawn([...args, url], { stdout: "pipe", stderr: "inherit" })
  const out = await new Response(child.stdout).text()
  await child.exited
  const errors = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0) +
    [...out.matchAll(/(?:connect|read|write|timeout) (\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0)
  return {
    rps: Math.round(Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? NaN)),
    p50: millis(/^\s+50%\s+(\S+)/m.exec(out)?.[1] ?? ""),
    p99: millis(/^\s+99%\s+(\S+)/m.exec(out)?.[1] ?? ""),
    max: millis(/^\s+Latency\s+\S+\s+\S+\s+(\S+)/m.exec(out)?.[1] ?? ""),
    errors
  }
}

/** Backups of `source` taken back to back until `done` settles: how many, and the median time of one (ms). */
const backupsUntil = async (command: Array<string>, done: Promise<unknown>) => {
  let finished = false
  void done.then(() => finished = true)
  const times: Array<number> = []
  while (!finished) {
    const started = performance.now()
    const result = spawnSync(command, { stdout: "ignore", stderr: "pipe" })
    if (result.exitCode !== 0) throw new Error(`backup failed: ${result.stderr.toString()}`)
    times.push(performance.now() - started)
    await Bun.sleep(0)
  }
  return { backups: times.length, medianMs: Math.round(median(times)) }
}

interface Run {
  readonly reads: Load
  readonly creates: Load
  readonly backups: number
  readonly medianMs: number
}

const medianLoad = (loads: ReadonlyArray<Load>): Load => ({
  rps: median(loads.map((load) => load.rps)),
  p50: median(loads.map((load) => load.p50)),
  p99: median(loads.map((load) => load.p99)),
  max: median(loads.map((load) => load.max)),
  errors: loads.reduce((sum, load) => sum + load.errors, 0)
})

const summarize = (runs: ReadonlyArray<Run>) => ({
  reads: medianLoad(runs.map((run) => run.reads)),
  creates: medianLoad(runs.map((run) => run.creates)),
  backups: median(runs.map((run) => run.backups)),
  backupMedianMs: median(runs.map((run) => run.medianMs))
})

const main = async () => {
  if (process.env.BENCH_SKIP_BUILD !== "1" || !existsSync(PETSTORE)) {
    if (spawnSync(["npm", "run", "build"], { cwd: ROOT, stdout: "ignore", stderr: "inherit" }).exitCode !== 0) {
      throw new Error("npm run build failed")
    }
  }
  const data = mkdtempSync(join(tmpdir(), "petstore-bench-backup-"))
  try {
    const db = join(data, "petstore.db")
    const key = createKey([PETSTORE], db, "bench", data)
    log(`seeding ${PETS} pets`)
    insertPets(db, PETS)
    const port = freePort()
    const origin = `http://127.0.0.1:${port}`
    const server = spawn([PETSTORE, "serve"], {
      env: { ...process.env, HOST: "127.0.0.1", PORT: String(port), DATABASE_URL: db, LOG_LEVEL: "warning" },
      stdout: "ignore",
      stderr: "inherit"
    })
    for (let attempt = 0; !(await fetch(`${origin}/healthz`).then((r) => r.ok, () => false)); attempt++) {
      if (attempt > 400) throw new Error("the server did not start")
      await Bun.sleep(50)
    }
    const names = ["no backup", ...Object.keys(STRATEGIES)]
    const runs: Record<string, Array<Run>> = Object.fromEntries(names.map((name) => [name, []]))
    for (let round = 1; round <= ROUNDS; round++) {
      for (const phase of round % 2 === 1 ? names : [...names].reverse()) {
        log(`round ${round}, phase: ${phase}`)
        const reads = wrk(`${origin}/v1/pets?limit=20`, key)
        const creates = wrk(`${origin}/v1/pets`, key, join(ROOT, "bench", "create.lua"))
        const both = Promise.all([reads, creates])
        const strategy = STRATEGIES[phase]
        const backups = strategy === undefined
          ? { backups: 0, medianMs: 0 }
          : await backupsUntil(strategy(db, join(data, "backup.db")), both)
        const [read, create] = await both
        runs[phase].push({ reads: read, creates: create, ...backups })
        console.log(JSON.stringify({ round, phase, ...runs[phase].at(-1) }))
      }
    }
    const phases = names.map((phase) => ({ phase, ...summarize(runs[phase]), rounds: runs[phase] }))
    for (const phase of phases) console.log(JSON.stringify({ ...phase, rounds: undefined }))
    server.kill("SIGTERM")
    await server.exited
    const result = {
      date: new Date().toISOString(),
      machine: { cpus: cpus().length, cpu: cpus()[0]?.model ?? "unknown", bun: Bun.version },
      pets: PETS,
      load: `two wrk -t1 -c${CONNECTIONS} -d${DURATION}s at once: GET /v1/pets?limit=20 and POST /v1/pets`,
      rounds: `${ROUNDS}, the phases in an order reversed every round; medians`,
      phases
    }
    mkdirSync(join(ROOT, "bench", "results"), { recursive: true })
    writeFileSync(join(ROOT, "bench", "results", "backup.json"), JSON.stringify(result, null, 2) + "\n")
    log("written: bench/results/backup.json")
  } finally {
    rmSync(data, { recursive: true, force: true })
  }
}

await main()
