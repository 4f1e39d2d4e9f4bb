/**
 * The request log when its reader is slow: stdout read at about 200 KB/s while 3 000 requests are answered. The pipe
 * fills, the executable waits for it without stopping to answer, and every request's line arrives, whole, once.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { BINARY, createKey, freePort, scratchDirectory, stopAll } from "./support/petstore.js"

const REQUESTS = 3000
const CONCURRENCY = 50
const READ_BYTES = 2048
const READ_EVERY_MS = 10

describe("a slow reader of stdout", () => {
  afterAll(stopAll)

  it("gets every request's line, whole, while the server goes on answering", async () => {
    const database = `${scratchDirectory()}/slow-log.db`
    const { key } = createKey(database)
    const port = await freePort()
    const child = spawn(BINARY, ["serve"], {
      env: {
        ...process.env,
        HOST: "127.0.0.1",
        PORT: String(port),
        DATABASE_URL: database,
        LOG_FORMAT: "json",
        LOG_LEVEL: "info",
        SHUTDOWN_DELAY: "0"
      },
      stdio: ["ignore", "pipe", "inherit"]
    })
    const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)))
    // The reader: a little at a time, never more than READ_BYTES every READ_EVERY_MS.
    const stdout = child.stdout!
    stdout.pause()
    let text = ""
    const reader = setInterval(() => {
      const chunk = stdout.read(READ_BYTES) ?? (stdout.readableLength > 0 ? stdout.read() : null)
      if (chunk !== null) text += chunk.toString("utf8")
    }, READ_EVERY_MS)
    try {
      const origin = `http://127.0.0.1:${port}`
      for (let i = 0; i < 200; i++) {
        if (await fetch(`${origin}/healthz`).then((r) => r.ok, () => false)) break
        await new Promise((done) => setTimeout(done, 50))
      }
      let next = 0
      let slowest = 0
      const worker = async () => {
        while (next < REQUESTS) {
          const id = `slow-${next++}`
          const started = Date.now()
          const response = await fetch(`${origin}/v1/pets?limit=1`, {
            headers: { authorization: `Bearer ${key}`, "x-request-id": id }
          })
          await response.arrayBuffer()
          expect(response.status).toBe(200)
          slowest = Math.max(slowest, Date.now() - started)
        }
      }
      await Promise.all(Array.from({ length: CONCURRENCY }, worker))
      // The server answered while its log waited for the reader.
      expect(slowest).toBeLessThan(2000)
      // Whole lines only: the last one may still be on its way.
      const whole = () => text.slice(0, text.lastIndexOf("\n") + 1)
      const requestLines = () => whole().split("\n").filter((line) => line.includes(`"requestId":"slow-`))
      for (let i = 0; i < 3000 && requestLines().length < REQUESTS; i++) {
        await new Promise((done) => setTimeout(done, 10))
      }

      const lines = whole().split("\n").filter((line) => line !== "")
      for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow()
      const ids = lines.map((line) => JSON.parse(line)).filter((entry) => entry.message === "request").map((entry) =>
        entry.annotations.requestId
      )
        .filter((id) => String(id).startsWith("slow-"))
      expect(ids).toHaveLength(REQUESTS)
      expect(new Set(ids).size).toBe(REQUESTS)
      expect(text).not.toContain("log lines dropped")
    } finally {
      clearInterval(reader)
      stdout.resume()
      child.kill("SIGTERM")
      await exited
    }
  })
})
