/**
 * `npm run bench`: petstore against a raw `Bun.serve` + `bun:sqlite` baseline (bench/raw.ts) doing the same work.
 * Creates are compared with a second baseline too: the same raw program without an fsync per commit
 * (`synchronous = NORMAL`), what petstore's group commit aims at while keeping every 201 durable.
 *
 * Builds both executables, seeds each with the same pets directly in SQLite (one transaction), and loads them in
 * turn — each scenario's runs back to back, in an order reversed every round — with wrk (Debian's `wrk` package;
 * installed with apt-get when missing and allowed), the same connection count and duration. Every round starts every
 * server again and warms it up (one process per round, so a row is not one process's luck). Each run also reads the
 * server's main-thread CPU time per request (`/proc`), the steadier measure of a feature's cost on a shared machine.
 * Every row is recorded against a previous build too, loaded in the same rounds as petstore: the executable
 * BENCH_PREVIOUS names, or one built from the git ref BENCH_PREVIOUS_REF in a worktree of its own (removed again);
 * without either, those rows are skipped. Petstore's peers — the same work on Hono with zod-openapi and on Elysia with
 * its openapi plugin (bench/peers/) — are loaded in the same rounds, each on its own copy of the database, durable as
 * raw; before the rounds petstore and its peers must answer the benchmarked requests exactly as raw does
 * (bench/peers/check.ts), and the report reads petstore's floors against the better of them. Loopback only. Prints a
 * table and writes JSON and Markdown under bench/results/.
 *
 * Environment: BENCH_DURATION (seconds per run, 3), BENCH_WARM (seconds of each scenario's load after each start, 1),
 * BENCH_CONNECTIONS (32), BENCH_ROUNDS (3), BENCH_PETS (10000), BENCH_SCALE (the sizes of the growth test,
 * "1000,1000000"; empty to skip), BENCH_SKIP_BUILD=1, BENCH_ONLY (a comma-separated list of scenario names to run, e.g.
 * "create" or "list 20,filtered list, deep cursor" — a comma and a space belong to a name; all by default; the feature
 * variants run on those of their scenarios),
 * BENCH_PREVIOUS (a previous build's executable), BENCH_PREVIOUS_REF (a git ref to build the previous build from),
 * BENCH_PEERS=0 (no peers), BASELINE_KEY_RECHECK_MS (passed on to raw and the peers: `bench/baseline.ts`).
 * The change feed's rows come last, from `bench/feed.ts` run as a child process (its own environment, BENCH_FEED_*);
 * with BENCH_ONLY set they run only when it names `feed`.
 */
import { spawn, spawnSync } from "bun"
import {
  chmodSync,
  closeSync,
  copyFileSync,
  existsSync,
  fdatasyncSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  writeSync
} from "node:fs"
import { cpus, tmpdir, totalmem } from "node:os"
import { join, resolve } from "node:path"
import { KEY_RECHECK_MS } from "./baseline.js"
import { differences } from "./peers/check.js"
import { cpuTicks, microsPerRequest } from "./proc.js"
import { createKey, insertPets } from "./seed.js"
import { median } from "./stats.js"

const ROOT = resolve(import.meta.dir, "..")
const RESULTS = join(ROOT, "bench", "results")
const DATA = join(RESULTS, "data")
const PETSTORE = join(ROOT, "dist", "petstore")
const RAW = join(RESULTS, "raw-server")
/** The programs built from bench/, each with the same flags: the raw baseline and petstore's peers. */
const BASELINES = {
  raw: { source: "bench/raw.ts", program: RAW },
  hono: { source: "bench/peers/hono.ts", program: join(RESULTS, "hono-server") },
  elysia: { source: "bench/peers/elysia.ts", program: join(RESULTS, "elysia-server") }
}
type Baseline = keyof typeof BASELINES
/** The peers the floors are read against: petstore's list and filtered list at least 0.9× the better, get one 0.8×. */
const PEERS: ReadonlyArray<"hono" | "elysia"> = process.env.BENCH_PEERS === "0" ? [] : ["hono", "elysia"]
const FLOORS: Record<string, number> = { "list 20": 0.9, "filtered list, deep cursor": 0.9, "get one": 0.8 }

const DURATION = Number(process.env.BENCH_DURATION ?? 3)
/** Seconds of each scenario's load a server takes after each start, before its runs are measured. */
const WARM = Number(process.env.BENCH_WARM ?? 1)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const PETS = Number(process.env.BENCH_PETS ?? 10_000)
const SCALE = (process.env.BENCH_SCALE ?? "1000,1000000").split(",").filter((s) => s !== "").map(Number)
// A comma followed by a space is part of a name ("filtered list, deep cursor").
const ONLY = (process.env.BENCH_ONLY ?? "").split(/,(?! )/).map((s) => s.trim()).filter((s) => s !== "")
const DEADLINE = Date.now() + 15 * 60_000

const log = (...args: Array<unknown>) => console.error("[bench]", ...args)

const run = (cmd: Array<string>, options: { env?: Record<string, string>; cwd?: string } = {}) => {
  const result = spawnSync(cmd, {
    cwd: options.cwd ?? ROOT,
    env: { ...process.env, ...options.env },
    stdout: "pipe",
    stderr: "pipe"
  })
  if (result.exitCode !== 0) {
    throw new Error(
      `${cmd.join(" ")} failed (${result.exitCode}):\n${result.stdout.toString()}${result.stderr.toString()}`
    )
  }
  return result.stdout.toString()
}

// ------------------------------------------------------------------------------------------------------- the tools

const ensureWrk = () => {
  if (spawnSync(["sh", "-c", "command -v wrk"]).exitCode === 0) return
  log("wrk is missing; installing Debian's wrk package")
  const sudo = process.getuid?.() === 0 ? [] : ["sudo"]
  run([...sudo, "apt-get", "update"])
  run([...sudo, "apt-get", "install", "-y", "wrk"])
}

const build = () => {
  const baselines = (["raw", ...PEERS] as const).map((name) => BASELINES[name])
  if (
    process.env.BENCH_SKIP_BUILD === "1" && existsSync(PETSTORE) &&
    baselines.every(({ program }) => existsSync(program))
  ) return
  log(`building dist/petstore, the raw baseline${PEERS.length > 0 ? " and the peers" : ""}`)
  run(["npm", "run", "build"])
  // The same build flags as petstore's `npm run build`.
  for (const { program, source } of baselines) {
    run(["bun", "build", source, "--compile", "--minify", "--bytecode", "--outfile", program])
  }
}

/** The build every row is also recorded against: its executable, what names it, and the directory to remove after. */
interface Previous {
  readonly program: string
  readonly label: string
  readonly temp?: string
}

/**
 * The previous build: the executable BENCH_PREVIOUS names, or else petstore built from the git ref BENCH_PREVIOUS_REF
 * in a detached worktree of its own (on this checkout's node_modules), copied to a temporary directory before the
 * worktree is removed; without either, none.
 */
const previousBuild = (): Previous | undefined => {
  const given = process.env.BENCH_PREVIOUS ?? ""
  if (given !== "") return { program: resolve(given), label: given }
  const ref = process.env.BENCH_PREVIOUS_REF ?? ""
  if (ref === "") return undefined
  const commit = run(["git", "rev-parse", "--short", `${ref}^{commit}`]).trim()
  log(`building the previous build from ${ref} (${commit})`)
  const temp = mkdtempSync(join(tmpdir(), "petstore-previous-"))
  const tree = join(temp, "tree")
  const program = join(temp, "petstore")
  try {
    run(["git", "worktree", "add", "--detach", tree, commit])
    try {
      symlinkSync(realpathSync(join(ROOT, "node_modules")), join(tree, "node_modules"))
      run(["npm", "run", "build"], { cwd: tree })
      copyFileSync(join(tree, "dist", "petstore"), program)
      chmodSync(program, 0o755)
    } finally {
      run(["git", "worktree", "remove", "--force", tree])
    }
  } catch (error) {
    rmSync(temp, { recursive: true, force: true })
    throw error
  }
  return { program, label: ref === commit ? commit : `${ref} (${commit})`, temp }
}

// ------------------------------------------------------------------------------------------------------- the data

/**
 * A database migrated by petstore itself (`program`: dist/petstore, or the previous build), with one API key it issued
 * and `pets` pets inserted in one transaction.
 */
const seed = (name: string, pets: number, program = PETSTORE): { readonly file: string; readonly key: string } => {
  mkdirSync(DATA, { recursive: true })
  const file = join(DATA, `${name}.db`)
  for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true })
  const key = createKey([program], file, "bench", ROOT)
  insertPets(file, pets)
  return { file, key }
}

const copyDb = (from: string, to: string) => {
  for (const suffix of ["", "-wal", "-shm"]) rmSync(to + suffix, { force: true })
  copyFileSync(from, to)
  return to
}

// ---------------------------------------------------------------------------------------------------- the servers

const freePort = () => {
  const socket = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
  const port = socket.port
  socket.stop(true)
  return port
}

interface Server {
  readonly name: string
  readonly origin: string
  readonly pid: number
  readonly startupMs: number
  readonly stop: () => Promise<void>
}

const rssMb = (pid: number): number => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN)
  return Math.round(kb / 102.4) / 10
}

/** What a server of the bench runs: the program, on which database, with which settings. */
interface ServerSettings {
  readonly name: string
  readonly kind: "petstore" | Baseline
  /** The petstore executable, when not dist/petstore (the previous build). */
  readonly program?: string
  readonly db: string
  readonly key: string
  readonly env?: Record<string, string>
}

/**
 * A server of the bench: its settings, and the process serving them now. Every round starts a new process on the same
 * database file: on this VM two processes of the same build differ by several per cent (what the JIT made of each),
 * so a row measured on one process for all its rounds carries that process's luck (`docs/performance.md`).
 */
interface Slot extends ServerSettings {
  server: Server
}

const startSlot = async (settings: ServerSettings): Promise<Slot> => ({ ...settings, server: await start(settings) })

const restart = async (slot: Slot) => {
  await slot.server.stop()
  slot.server = await start(slot)
}

/** Starts a server and waits for its first 200 on an authenticated list. */
const start = async (
  { db, env = {}, key, kind, name, program = PETSTORE }: ServerSettings
): Promise<Server> => {
  const port = freePort()
  const origin = `http://127.0.0.1:${port}`
  const cmd = kind === "petstore" ? [program, "serve"] : [BASELINES[kind].program]
  const started = performance.now()
  const child = spawn(cmd, {
    cwd: ROOT,
    env: { ...process.env, HOST: "127.0.0.1", PORT: String(port), DATABASE_URL: db, LOG_LEVEL: "warning", ...env },
    stdout: "ignore",
    stderr: "inherit"
  })
  const headers = { authorization: `Bearer ${key}` }
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}`)
    if (performance.now() - started > 20_000) throw new Error(`${name} did not answer within 20 s`)
    try {
      const response = await fetch(`${origin}/v1/pets?limit=1`, { headers })
      await response.arrayBuffer()
      if (response.status === 200) break
    } catch {
      // not listening yet
    }
    await Bun.sleep(1)
  }
  const startupMs = Math.round((performance.now() - started) * 10) / 10
  return {
    name,
    origin,
    pid: child.pid,
    startupMs,
    stop: async () => {
      child.kill("SIGTERM")
      const exited = await Promise.race([child.exited, Bun.sleep(5000).then(() => undefined)])
      if (exited === undefined) child.kill("SIGKILL")
    }
  }
}

// ------------------------------------------------------------------------------------------------------- the load

interface Scenario {
  readonly name: string
  readonly path: (pets: number) => string
  readonly script?: string
}

/**
 * Features on the request path, each measured on a server of its own beside the plain one, on the scenarios it
 * concerns: the row with it on next to the row without it, in the same rounds.
 */
interface Variant {
  readonly name: string
  readonly env: Record<string, string>
  /** Request headers the feature needs to do its work (a browser's Origin for CORS). */
  readonly headers?: ReadonlyArray<string>
  /** A wrk script of its own, in place of the scenario's (an Idempotency-Key that differs on every request). */
  readonly script?: string
  readonly scenarios: ReadonlyArray<string>
}

/** Where the tracing rows export their spans: a local OTLP sink (`bench/sink.ts`), as they would to a collector. */
const SINK_PORT = freePort()
// Traces alone: with OTEL_EXPORTER_OTLP_ENDPOINT the metrics would be counted and exported too, which the metrics row
// measures on its own.
const TRACED = {
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${SINK_PORT}/v1/traces`,
  OTEL_TRACES_SAMPLER: "traceidratio"
}

const VARIANTS: ReadonlyArray<Variant> = [
  // No feature: a second plain server, whose distance from the plain row is the rows' noise.
  {
    name: "none (a second plain server: the noise)",
    env: {},
    scenarios: ["list 20", "filtered list, deep cursor", "get one", "create"]
  },
  { name: "request log on", env: { LOG_LEVEL: "info" }, scenarios: ["list 20"] },
  { name: "metrics on", env: { METRICS_ADDRESS: `127.0.0.1:${freePort()}` }, scenarios: ["list 20", "get one"] },
  { name: "tracing 10 %", env: { ...TRACED, OTEL_TRACES_SAMPLER_ARG: "0.1" }, scenarios: ["list 20", "get one"] },
  { name: "tracing 100 %", env: { ...TRACED, OTEL_TRACES_SAMPLER_ARG: "1" }, scenarios: ["list 20", "get one"] },
  {
    name: "CORS on (CORS_ORIGINS set, requests with Origin)",
    env: { CORS_ORIGINS: "https://app.example.com" },
    headers: ["Origin: https://app.example.com"],
    scenarios: ["list 20", "filtered list, deep cursor", "get one", "create"]
  },
  // A quota far above what the load reaches: the cost of counting and stating it, never a 429.
  {
    name: "RATE_LIMIT on (never reached)",
    env: { RATE_LIMIT: "100000000/second" },
    scenarios: ["list 20", "get one", "create"]
  },
  {
    name: "Idempotency-Key on every create (keys that grow, as UUIDv7)",
    env: {},
    script: join(ROOT, "bench", "create-idempotent.lua"),
    scenarios: ["create"]
  },
  {
    name: "Idempotency-Key on every create (random keys, as UUIDv4)",
    env: {},
    script: join(ROOT, "bench", "create-idempotent-random.lua"),
    scenarios: ["create"]
  }
]

const ALL_SCENARIOS: ReadonlyArray<Scenario> = [
  { name: "list 20", path: () => "/v1/pets" },
  { name: "filtered list, deep cursor", path: (pets) => `/v1/pets?status=pending&after=${Math.floor(pets * 0.9)}` },
  { name: "get one", path: (pets) => `/v1/pets/${Math.ceil(pets / 2)}` },
  { name: "create", path: () => "/v1/pets", script: join(ROOT, "bench", "create.lua") }
]
const SCENARIOS = ONLY.length === 0 ? ALL_SCENARIOS : ALL_SCENARIOS.filter((scenario) => ONLY.includes(scenario.name))
const CREATE = "create"

interface Load {
  readonly rps: number
  readonly p50: number
  readonly p99: number
  readonly non2xx: number
  /**
   * The server's main thread's CPU time per request during the run (µs, `/proc/<pid>/task/<pid>/stat`): the thread
   * whose time bounds throughput. Steadier than the rate, which also moves with what wrk gets of the machine.
   */
  readonly cpuUs: number
}

const millis = (text: string): number => {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(text)
  if (match === null) return NaN
  const value = Number(match[1])
  return match[2] === "us" ? value / 1000 : match[2] === "ms" ? value : match[2] === "s" ? value * 1000 : value * 60_000
}

/** A wrk load on the server of process `pid`. */
const wrk = (
  pid: number,
  url: string,
  key: string,
  script?: string,
  seconds = DURATION,
  headers: ReadonlyArray<string> = []
): Load => {
  const args = ["wrk", "-t1", `-c${CONNECTIONS}`, `-d${seconds}s`, "--latency", "-H", `Authorization: Bearer ${key}`]
  for (const header of headers) args.push("-H", header)
  if (script !== undefined) args.push("-s", script)
  const ticks = cpuTicks(pid, "main")
  const out = run([...args, url])
  const requests = Number(/(\d+) requests in/.exec(out)?.[1] ?? NaN)
  const cpuUs = microsPerRequest(cpuTicks(pid, "main") - ticks, requests)
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? NaN)
  const p50 = millis(/^\s+50%\s+(\S+)/m.exec(out)?.[1] ?? "")
  const p99 = millis(/^\s+99%\s+(\S+)/m.exec(out)?.[1] ?? "")
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0)
  if (non2xx > 0) log(`warning: ${non2xx} non-2xx answers from ${url}`)
  return { rps, p50, p99, non2xx, cpuUs }
}

const summarize = (loads: ReadonlyArray<Load>): Load => ({
  rps: Math.round(median(loads.map((l) => l.rps))),
  p50: Math.round(median(loads.map((l) => l.p50)) * 1000) / 1000,
  p99: Math.round(median(loads.map((l) => l.p99)) * 1000) / 1000,
  non2xx: loads.reduce((sum, l) => sum + l.non2xx, 0),
  cpuUs: hundredths(median(loads.map((l) => l.cpuUs)))
})

/**
 * The disk's fdatasync latency now, in the data directory (median of 30 syncs of a 4 KiB append, ms): a durable create
 * waits for one, so with a fixed number of connections it bounds the rate of durable creates (the baseline without an
 * fsync per commit is not bound by it). Measured before and after the loads, it says how busy the disk was.
 */
const fsyncMillis = (): number => {
  const file = join(DATA, "fsync-probe")
  const fd = openSync(file, "w")
  const times: Array<number> = []
  try {
    for (let i = 0; i < 30; i++) {
      writeSync(fd, Buffer.alloc(4096, 120))
      const started = performance.now()
      fdatasyncSync(fd)
      times.push(performance.now() - started)
    }
  } finally {
    closeSync(fd)
    rmSync(file, { force: true })
  }
  return hundredths(median(times))
}

/** Two decimals, as every figure of the report is given. */
const hundredths = (value: number) => Math.round(value * 100) / 100
const ratio = (a: number, b: number) => hundredths(a / b)

/**
 * Before they are loaded, petstore and its peers must answer the benchmarked requests exactly as raw does
 * (bench/peers/check.ts), so that every program is measured doing the same work: a difference stops the bench. A peer
 * that answers a refusal around them otherwise (a framework's own reading of a bad request) is logged; petstore's
 * refusals say more than raw's, and are only counted.
 */
const checkSameWork = async (raw: Slot, petstore: Slot, peers: ReadonlyArray<Slot>) => {
  const servers = [petstore, ...peers].map((slot) => ({ name: slot.name, origin: slot.server.origin }))
  const found = await differences(raw.server.origin, servers, raw.key, PETS)
  const own = found.others.filter(({ server }) => server === petstore.name).length
  if (own > 0) log(`petstore words ${own} refusal details otherwise than raw (checked by its own tests)`)
  for (const { server, text } of found.others) {
    if (server !== petstore.name) log(`a peer answers a refusal otherwise than raw: ${text}`)
  }
  if (found.benchmarked.length > 0) {
    const lines = found.benchmarked.map(({ text }) => text).join("\n")
    throw new Error(`a server answers a benchmarked request otherwise than raw:\n${lines}`)
  }
}

// ------------------------------------------------------------------------------------------------------ the bench

const main = async () => {
  const began = performance.now()
  mkdirSync(RESULTS, { recursive: true })
  ensureWrk()
  build()
  const previous = previousBuild()
  if (previous === undefined) log(NO_PREVIOUS)

  log(`seeding ${PETS} pets`)
  const base = seed("bench", PETS)
  const dbs = {
    petstore: base.file,
    raw: copyDb(base.file, join(DATA, "raw.db")),
    rawNoFsync: copyDb(base.file, join(DATA, "raw-no-fsync.db")),
    hono: copyDb(base.file, join(DATA, "hono.db")),
    elysia: copyDb(base.file, join(DATA, "elysia.db"))
  }
  const key = base.key
  // The previous build migrates its own database and issues its own key, on the same pets.
  const previousData = previous === undefined ? undefined : seed("previous", PETS, previous.program)
  const subjects = {
    petstore: { name: "petstore", kind: "petstore", db: dbs.petstore, key },
    raw: { name: "raw", kind: "raw", db: dbs.raw, key },
    hono: PEERS.includes("hono") ? { name: "Hono", kind: "hono", db: dbs.hono, key } : undefined,
    elysia: PEERS.includes("elysia") ? { name: "Elysia", kind: "elysia", db: dbs.elysia, key } : undefined,
    previous: previous === undefined || previousData === undefined ? undefined : {
      name: "previous build",
      kind: "petstore",
      program: previous.program,
      db: previousData.file,
      key: previousData.key
    }
  } satisfies Record<string, ServerSettings | undefined>

  // Start-up to the first 200, alternated, three times each; the servers are stopped again.
  const startups = {
    petstore: [] as Array<number>,
    raw: [] as Array<number>,
    previous: [] as Array<number>,
    hono: [] as Array<number>,
    elysia: [] as Array<number>
  }
  for (let i = 0; i < 3; i++) {
    for (const which of ["petstore", "raw", "previous", "hono", "elysia"] as const) {
      const settings = subjects[which]
      if (settings === undefined) continue
      const server = await start(settings)
      startups[which].push(server.startupMs)
      await server.stop()
    }
  }

  const petstore = await startSlot(subjects.petstore)
  const previousSlot = subjects.previous === undefined ? undefined : await startSlot(subjects.previous)
  const raw = await startSlot(subjects.raw)
  const rawNoFsync = await startSlot({
    name: "raw, no fsync per commit",
    kind: "raw",
    db: dbs.rawNoFsync,
    key,
    env: { RAW_SYNCHRONOUS: "NORMAL" }
  })
  const peerSlots: Array<Slot> = []
  for (const name of PEERS) peerSlots.push(await startSlot(subjects[name]!))
  const sink = spawn(["bun", join(ROOT, "bench", "sink.ts")], {
    env: { ...process.env, PORT: String(SINK_PORT) },
    stdout: "ignore",
    stderr: "inherit"
  })
  const variantSlots = new Map<Variant, Slot>()
  for (const variant of VARIANTS.filter((v) => SCENARIOS.some((scenario) => v.scenarios.includes(scenario.name)))) {
    const db = copyDb(base.file, join(DATA, `variant-${variantSlots.size}.db`))
    variantSlots.set(variant, await startSlot({ name: variant.name, kind: "petstore", db, key, env: variant.env }))
  }
  const all = [
    petstore,
    ...(previousSlot === undefined ? [] : [previousSlot]),
    raw,
    rawNoFsync,
    ...peerSlots,
    ...variantSlots.values()
  ]
  const variantOf = (slot: Slot) => [...variantSlots].find(([, s]) => s === slot)?.[0]
  /** The scenarios a slot is loaded with: a variant's own, the creates alone for the baseline without fsync, else all. */
  const scenariosOf = (slot: Slot) =>
    SCENARIOS.filter((scenario) =>
      variantOf(slot)?.scenarios.includes(scenario.name) ?? (slot !== rawNoFsync || scenario.name === CREATE)
    )
  /** One wrk load of a scenario on a slot's server, with what its variant adds (a script, headers). */
  const load = (slot: Slot, scenario: Scenario, seconds = DURATION) => {
    const variant = variantOf(slot)
    return wrk(
      slot.server.pid,
      slot.server.origin + scenario.path(PETS),
      slot.key,
      variant?.script ?? scenario.script,
      seconds,
      variant?.headers
    )
  }
  try {
    await checkSameWork(raw, petstore, peerSlots)
    await Bun.sleep(1000)
    const rss = () => ({
      petstore: rssMb(petstore.server.pid),
      raw: rssMb(raw.server.pid),
      previous: previousSlot === undefined ? undefined : rssMb(previousSlot.server.pid),
      ...Object.fromEntries(peerSlots.map((slot) => [slot.kind, rssMb(slot.server.pid)]))
    })
    const idle = rss()

    const fsyncBefore = fsyncMillis()
    const loads: Record<string, Record<string, Array<Load>>> = {}
    const add = (scenario: string, server: string, result: Load) => {
      ;((loads[scenario] ??= {})[server] ??= []).push(result)
    }
    // Each scenario's runs back to back — the baselines, the plain petstore and every variant of it — in an order
    // reversed from one round to the next, so that a variant is measured beside its plain row, not minutes after it
    // (creates drift as the files grow and the disk's state changes), and no server always goes first.
    for (let round = 1; round <= ROUNDS; round++) {
      log(`round ${round} of ${ROUNDS}: new processes, warmed up`)
      for (const slot of all) {
        if (round > 1) await restart(slot)
        for (const scenario of scenariosOf(slot)) load(slot, scenario, WARM)
      }
      for (const scenario of SCENARIOS) {
        const runs = all.filter((slot) => scenariosOf(slot).includes(scenario)).map((slot) => () => {
          const variant = variantOf(slot)
          add(
            variant === undefined ? scenario.name : `${scenario.name} / ${variant.name}`,
            slot.name,
            load(slot, scenario)
          )
        })
        for (const run of round % 2 === 1 ? runs : runs.reverse()) run()
      }
    }
    const afterLoad = rss()
    const fsyncAfter = fsyncMillis()

    const scenarios = SCENARIOS.map((scenario) => {
      const a = summarize(loads[scenario.name][petstore.name])
      const b = summarize(loads[scenario.name][raw.name])
      return {
        scenario: scenario.name,
        path: scenario.path(PETS),
        petstore: a,
        raw: b,
        ratio: ratio(a.rps, b.rps),
        p99Ratio: ratio(a.p99, b.p99)
      }
    })
    // Creates against the baseline without an fsync per commit.
    const createLoads = loads[CREATE]?.[rawNoFsync.name]
    const noFsync = createLoads === undefined ? undefined : (() => {
      const a = summarize(loads[CREATE][petstore.name])
      const b = summarize(createLoads)
      return {
        scenario: `${CREATE}, against raw without an fsync per commit`,
        petstore: a,
        raw: b,
        ratio: ratio(a.rps, b.rps),
        p99Ratio: ratio(a.p99, b.p99)
      }
    })()
    const variants = [...variantSlots].flatMap(([variant, server]) =>
      SCENARIOS.filter((s) => variant.scenarios.includes(s.name)).map((scenario) => {
        const runs = loads[`${scenario.name} / ${variant.name}`][server.name]
        const plainRuns = loads[scenario.name][petstore.name]
        const load = summarize(runs)
        const rawLoad = summarize(loads[scenario.name][raw.name])
        return {
          variant: variant.name,
          scenario: scenario.name,
          load,
          raw: rawLoad,
          ratio: ratio(load.rps, rawLoad.rps),
          // Paired: the median of each round's ratio to the plain row of the same round, so what moves the machine
          // from one round to the next (the files' growth under creates, other work) cancels out.
          toPlain: hundredths(median(runs.map((run, i) => run.rps / plainRuns[i].rps))),
          toPlainOfMedians: ratio(load.rps, summarize(plainRuns).rps),
          // The same by the main thread's CPU per request: the plain row's over the feature's, so that below 1 is a
          // cost, as for throughput.
          plainCpuUs: summarize(plainRuns).cpuUs,
          cpuToPlain: hundredths(median(runs.map((run, i) => plainRuns[i].cpuUs / run.cpuUs)))
        }
      })
    )

    // Every scenario against the previous build, paired round by round as a feature's row against the plain one, with
    // petstore on top: above 1, petstore serves more, or spends less of the main thread, than the previous build.
    const againstPrevious = previousSlot === undefined ? undefined : {
      build: previous!.label,
      scenarios: SCENARIOS.map((scenario) => {
        const runs = loads[scenario.name][previousSlot.name]
        const petstoreRuns = loads[scenario.name][petstore.name]
        const load = summarize(runs)
        return {
          scenario: scenario.name,
          load,
          ratio: ratio(load.rps, summarize(loads[scenario.name][raw.name]).rps),
          petstoreToPrevious: hundredths(median(runs.map((run, i) => petstoreRuns[i].rps / run.rps))),
          petstoreCpuUs: summarize(petstoreRuns).cpuUs,
          cpuToPrevious: hundredths(median(runs.map((run, i) => run.cpuUs / petstoreRuns[i].cpuUs)))
        }
      })
    }

    // Petstore's peers: each scenario's median and its ratio to raw, and petstore over the better peer of the scenario
    // by the medians (the floors are read on it), with the median of the rounds' paired ratios beside it.
    const peers = peerSlots.length === 0 ? undefined : SCENARIOS.map((scenario) => {
      const runsOf = (slot: Slot) => loads[scenario.name][slot.name]
      const rawLoad = summarize(loads[scenario.name][raw.name])
      const each = peerSlots.map((slot) => {
        const load = summarize(runsOf(slot))
        return { peer: slot.name, load, ratio: ratio(load.rps, rawLoad.rps) }
      })
      const best = each.reduce((a, b) => b.load.rps > a.load.rps ? b : a)
      const petstoreRuns = runsOf(petstore)
      const petstoreLoad = summarize(petstoreRuns)
      const toBest = ratio(petstoreLoad.rps, best.load.rps)
      const floor = FLOORS[scenario.name]
      return {
        scenario: scenario.name,
        peers: each,
        petstore: petstoreLoad,
        best: best.peer,
        petstoreToBest: toBest,
        petstoreToBestPaired: hundredths(
          median(petstoreRuns.map((run, i) => run.rps / Math.max(...peerSlots.map((slot) => runsOf(slot)[i].rps))))
        ),
        floor,
        met: floor === undefined ? undefined : toBest >= floor
      }
    })

    for (const slot of all) await slot.server.stop()
    sink.kill("SIGTERM")
    await sink.exited

    // Cost as the data grows: the same lists on small and large catalogues.
    const growth: Array<Record<string, unknown>> = []
    for (const size of SCALE) {
      if (Date.now() > DEADLINE - 60_000) {
        log("skipping the growth test: out of time")
        break
      }
      log(`growth: seeding ${size} pets`)
      const data = seed(`scale-${size}`, size)
      const scaled = {
        petstore: await start({ name: `petstore ${size}`, kind: "petstore", db: data.file, key: data.key }),
        raw: await start({
          name: `raw ${size}`,
          kind: "raw",
          db: copyDb(data.file, join(DATA, `scale-${size}-raw.db`)),
          key: data.key
        })
      }
      try {
        for (const scenario of ALL_SCENARIOS.slice(0, 2)) {
          for (const kind of ["petstore", "raw"] as const) {
            const server = scaled[kind]
            wrk(server.pid, server.origin + scenario.path(size), data.key, undefined, 1)
            const load = wrk(server.pid, server.origin + scenario.path(size), data.key)
            growth.push({ size, scenario: scenario.name, server: kind, ...load })
          }
        }
      } finally {
        await scaled.petstore.stop()
        await scaled.raw.stop()
      }
    }
    const growthRatios = SCALE.length < 2 ?
      [] :
      ALL_SCENARIOS.slice(0, 2).flatMap((scenario) =>
        (["petstore", "raw"] as const).flatMap((server) => {
          const at = (size: number) =>
            growth.find((g) => g.size === size && g.scenario === scenario.name && g.server === server) as
              | (Load & { size: number })
              | undefined
          const small = at(SCALE[0])
          const large = at(SCALE.at(-1)!)
          // A size the deadline skipped has no ratio: the report says it was not measured.
          if (small === undefined || large === undefined) return []
          return [{
            scenario: scenario.name,
            server,
            small: SCALE[0],
            large: SCALE.at(-1)!,
            p50Ratio: ratio(large.p50, small.p50),
            rpsRatio: ratio(small.rps, large.rps)
          }]
        })
      )

    /** Petstore's figure over the previous build's, when there is one. */
    const toPrevious = (petstore: number, previous: number | undefined) =>
      previous === undefined ? undefined : ratio(petstore, previous)
    const previousStartup = previousSlot === undefined ? undefined : median(startups.previous)
    const startup = {
      petstore: median(startups.petstore),
      raw: median(startups.raw),
      ratio: ratio(median(startups.petstore), median(startups.raw)),
      previous: previousStartup,
      toPrevious: toPrevious(median(startups.petstore), previousStartup),
      ...Object.fromEntries(PEERS.map((name) => [name, median(startups[name])]))
    }
    const memory = {
      idle: { ...idle, ratio: ratio(idle.petstore, idle.raw), toPrevious: toPrevious(idle.petstore, idle.previous) },
      afterLoad: {
        ...afterLoad,
        ratio: ratio(afterLoad.petstore, afterLoad.raw),
        toPrevious: toPrevious(afterLoad.petstore, afterLoad.previous)
      }
    }
    const machine = {
      cpu: `${cpus()[0]?.model ?? "?"} (${cpus().length} cores)`,
      memoryGb: Math.round(totalmem() / 2 ** 30),
      bun: Bun.version,
      wrk:
        `wrk -t1 -c${CONNECTIONS} -d${DURATION}s, ${ROUNDS} rounds, each scenario's runs back to back in an order reversed every round, every server started again each round and warmed with ${WARM} s of each scenario, medians`,
      fsyncMs: { before: fsyncBefore, after: fsyncAfter },
      baselineKeyRecheckMs: KEY_RECHECK_MS
    }
    const feed = feedRows()
    const result = {
      date: new Date().toISOString(),
      machine,
      pets: PETS,
      scenarios,
      noFsync,
      variants,
      previous: againstPrevious,
      peers,
      startup,
      memory,
      growth,
      growthRatios,
      feed: feed?.json,
      seconds: Math.round((performance.now() - began) / 1000)
    }
    const markdown = feed === undefined ? table(result) : `${table(result)}\n\n${feed.markdown}`
    const stamp = result.date.replace(/[:.]/g, "-")
    writeFileSync(join(RESULTS, `${stamp}.json`), JSON.stringify(result, null, 2))
    writeFileSync(join(RESULTS, "latest.json"), JSON.stringify(result, null, 2))
    writeFileSync(join(RESULTS, "latest.md"), markdown)
    console.log(markdown)
    console.log(`\nJSON: bench/results/latest.json (${result.seconds} s)`)
  } finally {
    for (const slot of all) await slot.server.stop().catch(() => {})
    sink.kill()
    if (previous?.temp !== undefined) rmSync(previous.temp, { recursive: true, force: true })
  }
}

/**
 * The change feed's rows: `bench/feed.ts` (its own servers, on the build made above), unless BENCH_ONLY leaves `feed`
 * out. Its table and its JSON; undefined when skipped.
 */
const feedRows = () => {
  if (ONLY.length > 0 && !ONLY.includes("feed")) return undefined
  log("the change feed's rows (bench/feed.ts)")
  const child = spawnSync(["bun", join(ROOT, "bench", "feed.ts")], {
    cwd: ROOT,
    env: { ...process.env, BENCH_SKIP_BUILD: "1" },
    stdout: "ignore",
    stderr: "inherit"
  })
  if (child.exitCode !== 0) throw new Error(`bench/feed.ts failed (${child.exitCode})`)
  return {
    markdown: readFileSync(join(RESULTS, "feed.md"), "utf8").trimEnd(),
    json: JSON.parse(readFileSync(join(RESULTS, "feed.json"), "utf8")) as unknown
  }
}

const NO_PREVIOUS = "no previous build (set BENCH_PREVIOUS or BENCH_PREVIOUS_REF): its rows are skipped"

const table = (r: any): string => {
  const lines = [
    `| scenario | petstore req/s | raw req/s | ratio | petstore p50 / p99 ms | raw p50 / p99 ms | p99 ratio | main thread µs a request, petstore / raw |`,
    `|---|---|---|---|---|---|---|---|`
  ]
  for (const s of [...r.scenarios, ...(r.noFsync === undefined ? [] : [r.noFsync])]) {
    lines.push(
      `| ${s.scenario} | ${s.petstore.rps} | ${s.raw.rps} | **${s.ratio}** | ${s.petstore.p50} / ${s.petstore.p99} | ${s.raw.p50} / ${s.raw.p99} | ${s.p99Ratio} | ${s.petstore.cpuUs} / ${s.raw.cpuUs} |`
    )
  }
  lines.push(
    "",
    `| with a feature on | req/s | ratio to raw | ratio to the plain row: median of the rounds' | of the medians | main thread µs a request, plain → with | its ratio, plain / with | p50 / p99 ms |`,
    `|---|---|---|---|---|---|---|---|`
  )
  for (const v of r.variants) {
    lines.push(
      `| ${v.scenario}, ${v.variant} | ${v.load.rps} | ${v.ratio} | **${v.toPlain}** | ${v.toPlainOfMedians} | ${v.plainCpuUs} → ${v.load.cpuUs} | **${v.cpuToPlain}** | ${v.load.p50} / ${v.load.p99} |`
    )
  }
  if (r.previous === undefined) {
    lines.push("", `${NO_PREVIOUS[0].toUpperCase()}${NO_PREVIOUS.slice(1)}.`)
  } else {
    lines.push(
      "",
      `| against the previous build, ${r.previous.build} | previous req/s | its ratio to raw | petstore ÷ previous: median of the rounds' | main thread µs a request, previous → petstore | its ratio, previous / petstore | previous p50 / p99 ms |`,
      `|---|---|---|---|---|---|---|`
    )
    for (const p of r.previous.scenarios) {
      lines.push(
        `| ${p.scenario} | ${p.load.rps} | ${p.ratio} | **${p.petstoreToPrevious}** | ${p.load.cpuUs} → ${p.petstoreCpuUs} | **${p.cpuToPrevious}** | ${p.load.p50} / ${p.load.p99} |`
      )
    }
  }
  const peerNames: Array<string> = r.peers?.[0]?.peers.map((p: any) => p.peer) ?? []
  if (r.peers !== undefined) {
    lines.push(
      "",
      `| against petstore's peers |${
        peerNames.map((name) => ` ${name} req/s | its ratio to raw |`).join("")
      } petstore ÷ the better: of the medians | median of the rounds' | floor | main thread µs a request, ${
        peerNames.join(" / ")
      } / petstore |`,
      `|---|${peerNames.map(() => "---|---|").join("")}---|---|---|---|`
    )
    for (const p of r.peers) {
      lines.push(
        `| ${p.scenario} |${
          p.peers.map((x: any) => ` ${x.load.rps} | ${x.ratio} |`).join("")
        } **${p.petstoreToBest}** (${p.best}) | ${p.petstoreToBestPaired} | ${
          p.floor === undefined ? "" : `${p.floor}: ${p.met ? "met" : "**not met**"}`
        } | ${[...p.peers.map((x: any) => x.load.cpuUs), p.petstore.cpuUs].join(" / ")} |`
      )
    }
    const floors = r.peers.filter((p: any) => p.floor !== undefined)
    lines.push(
      "",
      `Floors, petstore ÷ max(${peerNames.join(", ")}) by req/s: ${
        floors.map((p: any) => `${p.scenario} ${p.petstoreToBest} against ${p.floor} (${p.met ? "met" : "not met"})`)
          .join("; ")
      }. ${
        r.machine.baselineKeyRecheckMs > 0
          ? `Raw and the peers trusted a key that passed for ${r.machine.baselineKeyRecheckMs} ms, as petstore does for 500.`
          : "Raw and the peers checked the key on every request; petstore trusts a key that passed for 500 ms."
      }`
    )
  } else {
    lines.push("", "No peers (BENCH_PEERS=0): their rows are skipped.")
  }
  // The previous build's columns, when there is one: its figure, and petstore's over it; then each peer's.
  const withPrevious = r.previous !== undefined
  const previousCells = (row: any) =>
    `${withPrevious ? ` ${row.previous} | ${row.toPrevious} |` : ""}${
      peerNames.map((name) => ` ${row[name.toLowerCase()]} |`).join("")
    }`
  lines.push(
    "",
    `| | petstore | raw | ratio |${withPrevious ? " previous build | petstore ÷ previous |" : ""}${
      peerNames.map((name) => ` ${name} |`).join("")
    }`,
    `|---|---|---|---|${withPrevious ? "---|---|" : ""}${peerNames.map(() => "---|").join("")}`,
    `| start-up to first 200 (ms, median of 3) | ${r.startup.petstore} | ${r.startup.raw} | **${r.startup.ratio}** |${
      previousCells(r.startup)
    }`,
    `| RSS idle (MB) | ${r.memory.idle.petstore} | ${r.memory.idle.raw} | **${r.memory.idle.ratio}** |${
      previousCells(r.memory.idle)
    }`,
    `| RSS after load (MB) | ${r.memory.afterLoad.petstore} | ${r.memory.afterLoad.raw} | ${r.memory.afterLoad.ratio} |${
      previousCells(r.memory.afterLoad)
    }`
  )
  if (r.growthRatios.length > 0) {
    lines.push(
      "",
      `| growth | server | p50 ms at ${r.growthRatios[0].small} | p50 ms at ${
        r.growthRatios[0].large
      } | latency ratio |`,
      `|---|---|---|---|---|`
    )
    for (const g of r.growthRatios) {
      const at = (size: number) =>
        r.growth.find((x: any) => x.size === size && x.scenario === g.scenario && x.server === g.server)
      lines.push(`| ${g.scenario} | ${g.server} | ${at(g.small)?.p50} | ${at(g.large)?.p50} | **${g.p50Ratio}** |`)
    }
  } else if (SCALE.length >= 2) {
    lines.push("", `Growth (${SCALE.join(" and ")} pets): not measured, out of time (fewer rounds, or BENCH_SCALE).`)
  }
  lines.push(
    "",
    `${r.machine.cpu}, ${r.machine.memoryGb} GB, Bun ${r.machine.bun}; ${r.machine.wrk}; ${r.pets} pets; fdatasync median ${r.machine.fsyncMs.before} ms before the loads, ${r.machine.fsyncMs.after} ms after.`
  )
  return lines.join("\n")
}

await main()
