/**
 * `npm run dev`, the development loop: the service under `bun --watch`, one readable line per request, no drain delay.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { type AddressInfo, createServer } from "node:net"
import { root } from "./support/cli.js"
import { tempDatabaseFile } from "./support/files.js"

/** A port nothing listens on now. */
const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(port))
    })
  })

describe("npm run dev", { timeout: 60_000 }, () => {
  it.scoped("serves with one pretty line per request, and stops without the drain delay", () =>
    Effect.gen(function*() {
      const database = yield* tempDatabaseFile
      const port = yield* Effect.promise(freePort)
      // A process group of its own (npm, sh, bun): the test stops the whole of it.
      const child = spawn("npm", ["run", "--silent", "dev"], {
        cwd: root,
        detached: true,
        env: {
          PATH: process.env.PATH,
          HOME: process.env.HOME,
          DATABASE_URL: database,
          HOST: "127.0.0.1",
          PORT: `${port}`
        },
        stdio: ["ignore", "pipe", "pipe"]
      })
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => child.exitCode === null && process.kill(-child.pid!, "SIGKILL"))
      )
      let output = ""
      child.stdout.on("data", (chunk) => output += chunk)
      child.stderr.on("data", (chunk) => output += chunk)
      const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
      const until = (seen: (text: string) => boolean) =>
        Effect.promise(async () => {
          while (!seen(output) && child.exitCode === null) await new Promise((done) => setTimeout(done, 50))
        })
      yield* until((text) => text.includes("petstore is listening"))
      expect(output).toMatch(
        /^\d{2}:\d{2}:\d{2}\.\d{3} INFO {2}petstore is listening .*docs=http:\/\/127\.0\.0\.1:\d+\/docs/m
      )
      const answer = yield* Effect.promise(() => fetch(`http://127.0.0.1:${port}/v1/pets`))
      expect(answer.status).toBe(401)
      yield* until((text) => text.includes("request GET"))
      const requestLines = output.split("\n").filter((line) => line.includes("/v1/pets"))
      expect(requestLines).toEqual([
        expect.stringMatching(/ INFO {2}request GET \/v1\/pets 401 [\d.]+ms requestId=\S+$/)
      ])
      process.kill(-child.pid!, "SIGTERM")
      yield* Effect.promise(() => exited)
      expect(output).toContain("shutting down: requests in flight get up to")
      expect(output).not.toContain("SHUTDOWN_DELAY")
    }))
})
