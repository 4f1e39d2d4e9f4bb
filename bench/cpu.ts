/**
 * `npm run bench:cpu -- [executable or "executable ENV=value …"] …`: what a request costs the server, in CPU time and in
 * memory allocated, for each executable (default `dist/petstore`) or configuration given, under the same wrk load,
 * in interleaved rounds (A B, B A, …), medians; and each subject after the first against the first, round by round,
 * with an interval (`pairedRatio`).
 *
 * On a shared VM throughput moves by ±20 % from one run to the next; the CPU time the server's process spends per
 * request (`/proc/<pid>/stat`, all its threads: the JIT's and the garbage collector's included) moves much less, and
 * the memory it allocates per request (JavaScriptCore's own GC log, `BUN_JSC_logGC=1`: what each young collection
 * found, summed) not at all. The main thread's share is given apart: it is the thread that bounds throughput (the
 * JIT's and the collector's threads run beside it on the other core). Use it to compare two builds or two
 * configurations; `npm run bench` for the figures against the raw baseline.
 *
 * Environment: CPU_ROUNDS (5), CPU_SECONDS per measure (2), CPU_WARM seconds of load before it (2), CPU_PATHS
 * (`/v1/pets/5000`, comma-separated). A subject's setting `WRK_SCRIPT=bench/create.lua` is the wrk script of its load
 * (not passed to the server): `"dist/petstore WRK_SCRIPT=bench/create.lua"` measures creates. Every answer must be a 2xx: a run that gets anything else stops the bench (a
 * cheap 401 measured as a request is the mistake this guards against).
 */
import { spawn, spawnSync } from "bun"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { cpuTicks, microsPerRequest } from "./proc.js"
import { createKey, insertPets } from "./seed.js"
import { median } from "./stats.js"

const ROOT = resolve(import.meta.dir, "..")
const ROUNDS = Number(process.env.CPU_ROUNDS ?? 5)
const SECONDS = Number(process.env.CPU_SECONDS ?? 2)
const WARM = Number(process.env.CPU_WARM ?? 2)
const PATHS = (process.env.CPU_PATHS ?? "/v1/pets/5000").split(",")

interface Subject {
  readonly label: string
  readonly executable: string
  readonly env: Record<string, string>
  readonly script: string | undefined
}

const subjects: Array<Subject> = (process.argv.length > 2 ? process.argv.slice(2) : ["dist/petstore"]).map((arg) => {
  const [executable, ...settings] = arg.split(/\s+/)
  const { WRK_SCRIPT, ...env } = Object.fromEntries(
    settings.map((setting) => setting.split("=", 2) as [string, string])
  )
  return {
    label: arg,
    executable: resolve(ROOT, executable),
    env,
    script: WRK_SCRIPT === undefined ? undefined : resolve(ROOT, WRK_SCRIPT)
  }
})

const work = mkdtempSync(join(tmpdir(), "petstore-cpu-"))

/** A database with 10 000 pets and a key, made by the first executable. */
const seed = (): { readonly file: string; readonly key: string } => {
  const file = join(work, "seed.db")
  const key = createKey([subjects[0].executable], file, "cpu", ROOT)
  insertPets(file, 10_000)
  return { file, key }
}

/** KB allocated between two points of JavaScriptCore's GC log: what each collection started from, less what the last one left. */
const allocatedKb = (log: string): number => {
  const starts = [...log.matchAll(/START [A-Z] (\d+)kb =>/g)].map((m) => Number(m[1]))
  const ends = [...log.matchAll(/=> (\d+)kb, p=/g)].map((m) => Number(m[1]))
  let total = 0
  for (let i = 0; i + 1 < Math.min(starts.length, ends.length); i++) total += starts[i + 1] - ends[i]
  return total
}

const wrk = (url: string, key: string, seconds: number, script: string | undefined) => {
  const args = ["wrk", "-t1", "-c32", `-d${seconds}s`, "-H", `Authorization: Bearer ${key}`]
  if (script !== undefined) args.push("-s", script)
  const out = spawnSync([...args, url]).stdout.toString()
  if (/Non-2xx/.test(out)) throw new Error(`non-2xx answers from ${url}:\n${out}`)
  return Number(/(\d+) requests in/.exec(out)?.[1] ?? NaN)
}

const measure = async (subject: Subject, path: string, seed: { file: string; key: string }) => {
  const file = join(work, "db.db")
  for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true })
  await Bun.write(file, Bun.file(seed.file))
  const port = 20_000 + Math.floor(Math.random() * 10_000)
  const logFile = join(work, "gc.log")
  rmSync(logFile, { force: true }) // a fresh file: the server writes its log from the start of it
  const server = spawn([subject.executable, "serve"], {
    env: {
      ...process.env,
      ...subject.env,
      HOST: "127.0.0.1",
      PORT: String(port),
      DATABASE_URL: file,
      LOG_LEVEL: "warning",
      BUN_JSC_logGC: "1"
    },
    stdout: "ignore",
    stderr: Bun.file(logFile) // where JavaScriptCore writes its GC log
  })
  const url = `http://127.0.0.1:${port}${path}`
  let requests: number, used: number, usedMain: number, logStart: number
  try {
    for (let i = 0; i < 200; i++) {
      const ok = await fetch(url, { headers: { authorization: `Bearer ${seed.key}` } }).then((r) => r.ok, () => false)
      if (ok) break
      await Bun.sleep(25)
    }
    wrk(url, seed.key, WARM, subject.script)
    logStart = readFileSync(logFile).length
    const ticks = cpuTicks(server.pid)
    const mainTicks = cpuTicks(server.pid, "main")
    requests = wrk(url, seed.key, SECONDS, subject.script)
    used = cpuTicks(server.pid) - ticks
    usedMain = cpuTicks(server.pid, "main") - mainTicks
  } finally {
    // A run that fails (a non-2xx answer) leaves no server behind to take the port and the CPU of the next.
    server.kill()
    await server.exited
  }
  const log = readFileSync(logFile).subarray(logStart).toString("latin1")
  const perRequest = (ticks: number) => microsPerRequest(ticks, requests)
  return { cpuUs: perRequest(used), mainUs: perRequest(usedMain), kb: allocatedKb(log) / requests }
}

/**
 * The main thread's CPU per request of `runs` against `base`'s, round by round (a round's runs follow each other, so
 * they share that moment's machine): the median of the rounds' ratios `base / runs` (above 1: cheaper than the base;
 * the bench's rows read the same way), with a 90 % bootstrap interval of that median (2 000 resamplings of the rounds,
 * a fixed seed). A process's own luck (what its JIT made of the warm-up) moves a round by more than a few per cent;
 * the interval says how far the median could move with other rounds like these, so a "within 5 %" is read off it.
 */
const pairedRatio = (base: ReadonlyArray<number>, runs: ReadonlyArray<number>) => {
  const ratios = base.map((value, round) => value / runs[round])
  let state = 0x2545f491
  const random = () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0
    return state / 2 ** 32
  }
  const medians: Array<number> = []
  for (let i = 0; i < 2000; i++) {
    medians.push(median(ratios.map(() => ratios[Math.floor(random() * ratios.length)])))
  }
  medians.sort((a, b) => a - b)
  return {
    ratio: median(ratios),
    low: medians[Math.floor(medians.length * 0.05)],
    high: medians[Math.floor(medians.length * 0.95)]
  }
}

const seeded = seed()
console.log(
  `| path | executable and settings | CPU µs per request | of it, the main thread | ` +
    `main thread, first row ÷ this row (90 % interval) | KB allocated per request | rounds |\n` +
    `|---|---|---|---|---|---|---|`
)
for (const path of PATHS) {
  const results = new Map(
    subjects.map((subject) => [subject, [] as Array<{ cpuUs: number; mainUs: number; kb: number }>])
  )
  // In an order reversed every round, so no subject always runs first (one build given three times in a fixed order
  // read 27.1, 25.4 and 25.5 µs a get one, 11 rounds: whether place or chance, reversing spreads it).
  for (let round = 0; round < ROUNDS; round++) {
    for (const subject of round % 2 === 0 ? subjects : [...subjects].reverse()) {
      results.get(subject)!.push(await measure(subject, path, seeded))
    }
  }
  const baseMain = results.get(subjects[0])!.map((run) => run.mainUs)
  for (const [subject, runs] of results) {
    const cpu = runs.map((run) => run.cpuUs)
    const main = runs.map((run) => run.mainUs)
    const paired = subject === subjects[0] ? undefined : pairedRatio(baseMain, main)
    console.log(
      `| ${path} | ${subject.label} | ${median(cpu).toFixed(1)} | ${median(main).toFixed(1)} | ${
        paired === undefined ? "—" : `${paired.ratio.toFixed(2)} (${paired.low.toFixed(2)}–${paired.high.toFixed(2)})`
      } | ${median(runs.map((run) => run.kb)).toFixed(1)} | ${cpu.map((value) => value.toFixed(0)).join(" ")} |`
    )
  }
}
rmSync(work, { recursive: true, force: true })
