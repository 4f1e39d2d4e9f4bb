/**
 * `npm run bench:profile [scenario]`: runs petstore from source under `bun --cpu-prof`, loads one scenario with wrk,
 * stops it, and prints where the CPU time went: self time by function and by package. Loopback only.
 *
 *     npm run bench:profile -- get        # list | filtered | get | create | create-idempotent | create-idempotent-random
 */
import { spawn, spawnSync } from "bun"
import { mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { join, resolve } from "node:path"
import { createKey, insertPets } from "./seed.js"

const ROOT = resolve(import.meta.dir, "..")
const OUT = join(ROOT, "bench", "results", "profile")
const scenario = process.argv[2] ?? "list"
const paths: Record<string, string> = {
  list: "/v1/pets",
  filtered: "/v1/pets?status=pending&after=9000",
  get: "/v1/pets/5000",
  create: "/v1/pets",
  "create-idempotent": "/v1/pets",
  "create-idempotent-random": "/v1/pets"
}

rmSync(OUT, { recursive: true, force: true })
mkdirSync(OUT, { recursive: true })
const db = join(OUT, "profile.db")
const key = createKey(["bun", "src/main.ts"], db, "profile", ROOT)
insertPets(db, 10_000)

const port = 18_000 + Math.floor(Math.random() * 1000)
const child = spawn(["bun", "--cpu-prof", `--cpu-prof-dir=${OUT}`, "src/main.ts", "serve"], {
  cwd: ROOT,
  env: {
    ...process.env,
    HOST: "127.0.0.1",
    PORT: String(port),
    DATABASE_URL: db,
    LOG_LEVEL: process.env.LOG_LEVEL ?? "warning"
  },
  stdout: "ignore",
  stderr: "inherit"
})
for (let i = 0; i < 500; i++) {
  try {
    if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) break
  } catch {
    await Bun.sleep(20)
  }
}
const args = ["wrk", "-t1", "-c32", "-d5s", "-H", `Authorization: Bearer ${key}`]
if (scenario.startsWith("create")) args.push("-s", join(ROOT, "bench", `${scenario}.lua`))
console.log(spawnSync([...args, `http://127.0.0.1:${port}${paths[scenario]}`]).stdout.toString())
child.kill("SIGTERM")
await child.exited

const file = readdirSync(OUT).find((name) => name.endsWith(".cpuprofile"))
if (file === undefined) throw new Error("no .cpuprofile written")
interface Node {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  hitCount?: number
}
const profile = JSON.parse(readFileSync(join(OUT, file), "utf8")) as { nodes: Array<Node>; samples: Array<number> }
const hits = new Map<number, number>()
for (const sample of profile.samples) hits.set(sample, (hits.get(sample) ?? 0) + 1)
const total = profile.samples.length
const byFunction = new Map<string, number>()
const byPackage = new Map<string, number>()
for (const node of profile.nodes) {
  const count = hits.get(node.id) ?? node.hitCount ?? 0
  if (count === 0) continue
  const { functionName, lineNumber, url } = node.callFrame
  const where = url.replace(ROOT + "/", "").replace(/^.*node_modules\//, "")
  const name = `${functionName || "(anonymous)"} ${where}:${lineNumber + 1}`
  byFunction.set(name, (byFunction.get(name) ?? 0) + count)
  const pkg = url === ""
    ? `(${functionName || "native"})`
    : url.includes("node_modules/")
    ? url.replace(/^.*node_modules\//, "").split("/").slice(0, url.includes("node_modules/@") ? 2 : 1).join("/")
    : where
  byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + count)
}
const top = (map: Map<string, number>, n: number) =>
  [...map].sort((a, b) => b[1] - a[1]).slice(0, n).map(([name, count]) =>
    `${((100 * count) / total).toFixed(1).padStart(5)} %  ${name}`
  ).join("\n")
console.log(
  `${file}: ${total} samples\n\nself time by package or file:\n${top(byPackage, 20)}\n\nself time by function:\n${
    top(byFunction, 30)
  }`
)
