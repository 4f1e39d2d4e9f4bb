/**
 * The drain and the long poll, on the compiled executable: polls waiting at SIGTERM (one filtered) are answered their
 * page as it stands, empty with `next`, once the listener stops accepting connections — not cut off at
 * SHUTDOWN_TIMEOUT — and each `request` log line says 200; the process exits 0 well before their wait.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { createKey, scratchDirectory, startPetstore, stopAll } from "./support/petstore.js"

const DELAY_MS = 500

describe("SIGTERM with long polls waiting", () => {
  afterAll(stopAll)

  it("answers each its empty page with next, logs it 200, and exits 0 before their wait is over", async () => {
    const database = `${scratchDirectory()}/drain-polls.db`
    const { key } = createKey(database)
    const server = await startPetstore({
      database,
      env: { SHUTDOWN_DELAY: `${DELAY_MS} millis`, SHUTDOWN_TIMEOUT: "20 seconds" }
    })
    const headers = (id: string) => ({ authorization: `Bearer ${key}`, "x-request-id": id })
    const listed = await fetch(`${server.origin}/v1/pets`, { headers: headers("list") })
    const position = listed.headers.get("feed-position")!
    const polls = ["", "&status=sold"].map((query, i) =>
      fetch(`${server.origin}/v1/pets/changes?wait=25${query}`, { headers: headers(`poll-${i}`) }).then(
        async (response) => ({ status: response.status, body: await response.json() }),
        (error: Error) => ({ status: 0, body: error.message })
      )
    )
    await new Promise((done) => setTimeout(done, 300))
    const signalled = Date.now()
    const { code } = await server.kill("SIGTERM")
    const exitedAfter = Date.now() - signalled
    expect(code).toBe(0)
    // The polls waited 25 s; the drain answered them once the listener stopped accepting, SHUTDOWN_TIMEOUT unused.
    expect(exitedAfter).toBeLessThan(10_000)
    for (const poll of await Promise.all(polls)) {
      expect(poll).toEqual({ status: 200, body: { changes: [], next: position } })
    }
    const lines = server.output().split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line))
    const logged = lines.filter((entry) => entry.message === "request" && /^poll-/.test(entry.annotations.requestId))
    expect(logged.map((entry) => entry.annotations.status)).toEqual([200, 200])
  })
})
