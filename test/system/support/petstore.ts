/**
 * The compiled executable (dist/petstore, built by `npm run test:system`) run the way an operator runs it: its own
 * database file, `keys create` on the command line, `serve` on a free loopback port. Every server started here is
 * killed by its pid when the test file ends (`stopAll`, from afterAll) or when the test process exits.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"

export const BINARY = resolve(import.meta.dirname, "../../../dist/petstore")

const LOOPBACK = "127.0.0.1"

if (!existsSync(BINARY)) {
  throw new Error(`${BINARY} is missing: run the system tests with 'npm run test:system', which builds it`)
}

/** A port nothing listens on right now: the kernel's pick for port 0. */
export const freePort = () =>
  new Promise<number>((done, fail) => {
    const server = createServer()
    server.once("error", fail)
    server.listen(0, LOOPBACK, () => {
      const address = server.address()
      server.close(() =>
        typeof address === "object" && address !== null ? done(address.port) : fail(new Error("no port"))
      )
    })
  })

const directories: Array<string> = []

/** A fresh directory for a database, removed when the test file ends. */
export const scratchDirectory = () => {
  const directory = mkdtempSync(join(tmpdir(), "petstore-system-"))
  directories.push(directory)
  return directory
}

/** Runs a command of the executable to its end. */
export const run = (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const result = spawnSync(BINARY, args, {
    env: { ...process.env, LOG_FORMAT: "json", ...env },
    encoding: "utf8",
    timeout: 20_000
  })
  if (result.status !== 0) {
    throw new Error(`petstore ${args.join(" ")} exited with ${result.status}: ${result.stderr}${result.stdout}`)
  }
  return result
}

/**
 * Runs the executable to its end with only the environment given (and PATH), from `cwd` (a fresh scratch directory
 * unless given), as the user `as` when given (through `setpriv`). The exit code is returned, not checked.
 */
export const runAlone = (
  args: ReadonlyArray<string>,
  env: Record<string, string> = {},
  options: { readonly cwd?: string; readonly as?: number } = {}
) => {
  const command = options.as === undefined
    ? [BINARY, ...args]
    : ["setpriv", `--reuid=${options.as}`, `--regid=${options.as}`, "--clear-groups", BINARY, ...args]
  const result = spawnSync(command[0], command.slice(1), {
    cwd: options.cwd ?? scratchDirectory(),
    env: { PATH: process.env.PATH ?? "", LOG_FORMAT: "json", ...env },
    encoding: "utf8",
    timeout: 30_000
  })
  return { status: result.status, stdout: result.stdout, stderr: result.stderr }
}

/** `petstore keys create`: the key, alone on the last line of stdout, and its id. */
export const createKey = (database: string, name = "system") => {
  const lines = run(["keys", "create", "--name", name, "--database", database]).stdout.split("\n").filter((line) =>
    line.trim() !== ""
  )
  const key = lines[lines.length - 1].trim()
  const id = /^psk_([0-9a-f]{12})_/.exec(key)?.[1]
  if (id === undefined) throw new Error(`keys create printed no key: ${lines.join("\n")}`)
  return { key, id }
}

export const revokeKey = (database: string, id: string) => run(["keys", "revoke", id, "--database", database])

export interface Petstore {
  readonly pid: number
  readonly port: number
  readonly origin: string
  readonly database: string
  /** Everything the server wrote so far. */
  readonly output: () => string
  /** Whether the process is still running. */
  readonly alive: () => boolean
  /** Sends the signal to the petstore process and waits until it has exited. */
  readonly kill: (
    signal: NodeJS.Signals
  ) => Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
}

const running = new Set<ChildProcess>()

export interface Spawned {
  readonly child: ChildProcess
  /** Everything the process wrote so far, stdout and stderr. */
  readonly output: () => string
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
}

/**
 * Starts a command of the executable (JSON logs and no SHUTDOWN_DELAY unless `env` says otherwise); killed by `stopAll`
 * if still running.
 */
export const spawnPetstore = (
  args: ReadonlyArray<string>,
  env: Record<string, string>,
  options: { readonly cwd?: string; readonly inheritEnv?: boolean } = {}
): Spawned => {
  const child = spawn(BINARY, args, {
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    // No delay between SIGTERM and the drain unless a test asks for one (test/system/DrainKeepAlive.test.ts).
    env: {
      ...(options.inheritEnv === false ? { PATH: process.env.PATH ?? "" } : process.env),
      LOG_FORMAT: "json",
      SHUTDOWN_DELAY: "0",
      ...env
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  running.add(child)
  let output = ""
  child.stdout!.on("data", (chunk) => output += chunk)
  child.stderr!.on("data", (chunk) => output += chunk)
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
    child.once("exit", (code, signal) => {
      running.delete(child)
      done({ code, signal })
    })
  )
  return { child, output: () => output, exited }
}

/**
 * `petstore serve` on the given database, once it answers GET /healthz: on a free loopback port, or on `port` (a
 * server killed and started again where its clients reconnect).
 */
export const startPetstore = async (
  options: { readonly database: string; readonly env?: Record<string, string>; readonly port?: number }
) => {
  for (let attempt = 1;; attempt++) {
    const port = options.port ?? await freePort()
    const { child, exited, output: read } = spawnPetstore(["serve"], {
      HOST: LOOPBACK,
      PORT: String(port),
      DATABASE_URL: options.database,
      ...options.env
    })
    const alive = () => child.exitCode === null && child.signalCode === null
    const origin = `http://${LOOPBACK}:${port}`
    const deadline = Date.now() + 10_000
    while (alive() && Date.now() < deadline) {
      const healthy = await fetch(`${origin}/healthz`).then((response) => response.ok, () => false)
      if (healthy) {
        const server: Petstore = {
          pid: child.pid!,
          port,
          origin,
          database: options.database,
          output: read,
          alive,
          kill: (signal) => {
            if (alive()) process.kill(child.pid!, signal)
            return exited
          }
        }
        return server
      }
      await new Promise((done) => setTimeout(done, 50))
    }
    if (alive()) process.kill(child.pid!, "SIGKILL")
    await exited
    // Another process may have taken the port between its choice and the listen: try another one (or, for a port
    // given, the same one a moment later).
    if (attempt < 3 && /EADDRINUSE|address already in use|Cannot listen/i.test(read())) {
      if (options.port !== undefined) await new Promise((done) => setTimeout(done, 500))
      continue
    }
    throw new Error(`petstore serve did not answer /healthz within 10 s:\n${read().slice(-3000)}`)
  }
}

/** Kills every server still running (by its pid) and removes the scratch directories. */
export const stopAll = async () => {
  const children = [...running]
  await Promise.all(children.map((child) =>
    new Promise<void>((done) => {
      if (child.exitCode !== null || child.signalCode !== null) return done()
      child.once("exit", () => done())
      process.kill(child.pid!, "SIGKILL")
    })
  ))
  for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true })
}

process.once("exit", () => {
  for (const child of running) {
    if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, "SIGKILL")
  }
})
