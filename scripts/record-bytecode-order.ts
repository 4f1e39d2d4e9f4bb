/**
 * `npm run build:order`: records which functions a start of the service uses, for `bun build --bytecode-order`
 * (profile-guided bytecode layout: the executable reads and decodes less of itself at start-up).
 *
 * Builds dist/petstore, runs it the way production does — a fresh database, `keys create`, `serve`, one request to each
 * endpoint, SIGTERM — with `BUN_BYTECODE_ORDER_OUT`, and writes scripts/petstore.order, which `npm run build` uses.
 * Functions are matched by a hash of their syntax, so an older profile still applies to changed code; record again
 * when much of the start-up path has changed. The profile holds hashes, not source.
 */
import { spawn, spawnSync } from "bun"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"

const ROOT = resolve(import.meta.dir, "..")
const ORDER = join(ROOT, "scripts", "petstore.order")
const PETSTORE = join(ROOT, "dist", "petstore")

const run = (cmd: Array<string>, env: Record<string, string> = {}) => {
  const result = spawnSync(cmd, { cwd: ROOT, env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" })
  if (result.exitCode !== 0) throw new Error(`${cmd.join(" ")} failed:\n${result.stdout}${result.stderr}`)
  return result.stdout.toString()
}

run(["npm", "run", "build"])
const scratch = mkdtempSync(join(tmpdir(), "petstore-order-"))
try {
  const database = join(scratch, "petstore.db")
  const key = run([PETSTORE, "keys", "create", "--name", "order"], { DATABASE_URL: database, LOG_LEVEL: "error" })
    .trim().split("\n").at(-1)!
  const port = 20_000 + Math.floor(Math.random() * 10_000)
  const origin = `http://127.0.0.1:${port}`
  rmSync(ORDER, { force: true })
  const server = spawn([PETSTORE, "serve"], {
    cwd: ROOT,
    env: {
      ...process.env,
      BUN_BYTECODE_ORDER_OUT: ORDER,
      HOST: "127.0.0.1",
      PORT: String(port),
      DATABASE_URL: database
    },
    stdout: "ignore",
    stderr: "inherit"
  })
  const headers = { authorization: `Bearer ${key}` }
  const started = Date.now()
  for (;;) {
    if (Date.now() - started > 20_000) throw new Error("petstore did not answer within 20 s")
    const answer = await fetch(`${origin}/v1/pets?limit=1`, { headers }).catch(() => undefined)
    if (answer?.status === 200) break
    await Bun.sleep(5)
  }
  const created = await fetch(`${origin}/v1/pets`, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({ name: "order", categoryId: 1 })
  })
  const pet = (await created.json()) as { readonly id: number }
  for (const path of [`/v1/pets/${pet.id}`, "/v1/pets?status=available&after=1&limit=5", "/healthz", "/readyz"]) {
    await (await fetch(origin + path, { headers })).arrayBuffer()
  }
  server.kill("SIGTERM")
  if ((await server.exited) !== 0) throw new Error("petstore did not stop cleanly")
  console.error(`wrote ${ORDER}; now run npm run build`)
} finally {
  rmSync(scratch, { recursive: true, force: true })
}
