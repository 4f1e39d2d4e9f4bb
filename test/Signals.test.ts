/**
 * Signals as a supervisor, a script or a developer's terminal send them. `npm start`: a signal sent to the PID that
 * `npm start` gave stops the service. npm passes SIGINT and SIGTERM on to its child, the shell of the script, which
 * passes nothing on: the script `exec`s Bun, so that npm's child is the service itself. The process and its port are
 * released, and the first line after the signal says what happens next. A second signal stops the service at once;
 * the same signal delivered twice at once (a Ctrl-C under `npm start` reaches the service from the terminal and from
 * npm) starts one drain.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { tempDatabaseFile } from "./support/files.js"
import { freePort } from "./support/observability.js"

const root = fileURLToPath(new URL("..", import.meta.url))

/** The processes under `pid` (npm's shell or the service), so that none is left behind should one outlive npm. */
const descendantsOf = (pid: number): Array<number> => {
  const children = spawnSync("ps", ["-o", "pid=", "--ppid", String(pid)], { encoding: "utf8" }).stdout
    .split("\n").map((line) => Number(line.trim())).filter((child) => child > 0)
  return children.flatMap((child) => [child, ...descendantsOf(child)])
}

const isRunning = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const answers = (port: number) =>
  fetch(`http://127.0.0.1:${port}/healthz`).then((response) => response.status === 200, () => false)

/** `command` until the service answers /healthz: its process, its output so far, and its exit. */
const startService = (command: ReadonlyArray<string>, port: number, database: string, env: Record<string, string>) =>
  Effect.promise(async () => {
    const child: ChildProcess = spawn(command[0], command.slice(1), {
      cwd: root,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        HOST: "127.0.0.1",
        PORT: String(port),
        DATABASE_URL: database,
        LOG_FORMAT: "json",
        ...env
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout!.on("data", (chunk) => output += chunk)
    child.stderr!.on("data", (chunk) => output += chunk)
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
      child.once("exit", (code, signal) => done({ code, signal }))
    )
    let started = false
    exited.then(() => started = true, () => {})
    for (let attempt = 0; attempt < 300 && !started; attempt++) {
      started = await answers(port)
      if (!started) await new Promise((done) => setTimeout(done, 100))
    }
    return { pid: child.pid!, output: () => output, exited }
  })

/** The service's own log lines so far, without those of requests. */
const serviceLines = (output: string): Array<{ message: string }> =>
  output.split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line))
    .filter((line) => line.message !== "request")

describe("npm start", () => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it.scoped(`stops on ${signal} sent to npm's PID, releasing its port`, () =>
      Effect.gen(function*() {
        const port = yield* freePort
        const npm = yield* startService(["npm", "start"], port, yield* tempDatabaseFile, { SHUTDOWN_DELAY: "0" })
        expect(yield* Effect.promise(() => answers(port)), npm.output()).toBe(true)
        const below = descendantsOf(npm.pid)
        expect(below.length).toBeGreaterThan(0)
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => below.filter(isRunning).forEach((pid) => process.kill(pid, "SIGKILL")))
        )

        process.kill(npm.pid, signal)
        yield* Effect.promise(() => npm.exited)

        expect(below.filter(isRunning)).toEqual([])
        expect(yield* Effect.promise(() => answers(port))).toBe(false)
        const lines = serviceLines(npm.output())
        const after = lines.findIndex((line) => line.message === "petstore is listening") + 1
        expect(lines[after].message).toBe(
          "shutting down: requests in flight get up to 10s (SHUTDOWN_TIMEOUT) to finish; " +
            "a second Ctrl-C or signal stops at once"
        )
        expect(lines.at(-1)?.message).toBe("stopped")
      }), 60_000)
  }
})

describe("a second signal", () => {
  const service = [process.execPath, "src/main.ts"]

  it.scoped(
    "stops the service at once, by that signal, while the first one's delay still runs",
    () =>
      Effect.gen(function*() {
        const port = yield* freePort
        const server = yield* startService(service, port, yield* tempDatabaseFile, { SHUTDOWN_DELAY: "1 minute" })
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => isRunning(server.pid) && process.kill(server.pid, "SIGKILL"))
        )
        process.kill(server.pid, "SIGTERM")
        yield* Effect.promise(async () => {
          while (!server.output().includes("shutting down")) await new Promise((done) => setTimeout(done, 50))
        })
        // Past the time within which a second delivery is taken for a copy of the first.
        yield* Effect.promise(() => new Promise((done) => setTimeout(done, 400)))
        process.kill(server.pid, "SIGTERM")
        expect(yield* Effect.promise(() => server.exited)).toEqual({ code: null, signal: "SIGTERM" })
        expect(serviceLines(server.output()).map((line) => line.message)).not.toContain("stopped")
      }),
    60_000
  )

  it.scoped(
    "delivered twice at once (a Ctrl-C under npm start on a terminal) is one: the drain runs to its end",
    () =>
      Effect.gen(function*() {
        const port = yield* freePort
        const server = yield* startService(service, port, yield* tempDatabaseFile, { SHUTDOWN_DELAY: "1s" })
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => isRunning(server.pid) && process.kill(server.pid, "SIGKILL"))
        )
        process.kill(server.pid, "SIGINT")
        process.kill(server.pid, "SIGINT")
        expect(yield* Effect.promise(() => server.exited)).toEqual({ code: 0, signal: null })
        expect(serviceLines(server.output()).at(-1)?.message).toBe("stopped")
      }),
    60_000
  )
})
