/**
 * The compiled executable as an operator runs it: a fresh database, `keys create`, `serve` on a free port, signals.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"

export const EXECUTABLE = resolve(import.meta.dirname, "../../dist/petstore")

export const freePort = () =>
  new Promise<number>((done, fail) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => (typeof address === "object" && address !== null ? done(address.port) : fail(new Error("no port"))))
    })
  })

export const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "petstore-system-"))
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

/** Runs a command of the executable to completion. */
export const petstore = (args: ReadonlyArray<string>, env: Record<string, string>) => {
  const result = spawnSync(EXECUTABLE, args, { env: { ...process.env, ...env }, encoding: "utf8", timeout: 30_000 })
  return { status: result.status, stdout: result.stdout, stderr: result.stderr }
}

/** Issues a key on the database, as `keys create` prints it (the last line of stdout). */
export const createKey = (env: Record<string, string>) => {
  const result = petstore(["keys", "create", "--name", "system"], env)
  if (result.status !== 0) throw new Error(`keys create failed: ${result.stderr}`)
  return result.stdout.trim().split("\n").at(-1)!
}

export interface Run {
  readonly child: ChildProcess
  /** Everything it wrote, stdout and stderr. */
  readonly output: () => string
  /** Resolves with the exit code once the process has exited. */
  readonly exited: Promise<number | null>
}

/** Starts a command of the executable (JSON logs unless `env` says otherwise), capturing its output. */
export const start = (
  args: ReadonlyArray<string>,
  env: Record<string, string>,
  options: { readonly cwd?: string; readonly inheritEnv?: boolean } = {}
): Run => {
  const child = spawn(EXECUTABLE, args, {
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    env: { ...(options.inheritEnv === false ? { PATH: process.env.PATH ?? "" } : process.env), LOG_FORMAT: "json", ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout!.on("data", (chunk) => (output += chunk))
  child.stderr!.on("data", (chunk) => (output += chunk))
  const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)))
  return { child, output: () => output, exited }
}

export interface Running extends Run {
  readonly origin: string
  readonly process: ChildProcess
  readonly kill: (signal: NodeJS.Signals) => void
}

/** Starts `petstore serve` on a free loopback port and waits until /healthz answers. */
export const serve = async (env: Record<string, string>): Promise<Running> => {
  const port = await freePort()
  const { child, exited, output: read } = start(["serve"], { ...env, HOST: "127.0.0.1", PORT: String(port) })
  const output = read
  const origin = `http://127.0.0.1:${port}`
  for (let attempt = 0; attempt < 100; attempt++) {
    const up = await fetch(`${origin}/healthz`).then((response) => response.ok, () => false)
    if (up) return { origin, child, process: child, output, exited, kill: (signal) => child.kill(signal) }
    if (child.exitCode !== null) break
    await new Promise((done) => setTimeout(done, 100))
  }
  child.kill("SIGKILL")
  throw new Error(`petstore did not answer /healthz:\n${output()}`)
}
