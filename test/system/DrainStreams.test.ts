/**
 * The drain and a stream whose client stopped reading, on the compiled executable behind Bun's listener: its socket
 * full, Bun would hold its answer until it can write again; the drain lets it go once the streams end, and the process
 * exits long before SHUTDOWN_TIMEOUT.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { connect } from "node:net"
import { createKey, scratchDirectory, startPetstore, stopAll } from "./support/petstore.js"
import { seedPets } from "./support/sqlite.js"

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))

describe("SIGTERM with a stream whose client stopped reading", () => {
  afterAll(stopAll)

  it("exits 0 without waiting SHUTDOWN_TIMEOUT for it", async () => {
    const database = `${scratchDirectory()}/drain-streams.db`
    const { key } = createKey(database)
    // Enough events to fill the socket's buffers both ways.
    seedPets(database, 100_000)
    const server = await startPetstore({ database, env: { SHUTDOWN_TIMEOUT: "60 seconds" } })
    const socket = connect(server.port, "127.0.0.1")
    let received = 0
    socket.on("data", (chunk) => {
      received += chunk.length
      // Reads the head of the answer, then nothing more: the server's writes fill the socket.
      socket.pause()
    })
    socket.on("error", () => undefined)
    socket.write(
      `GET /v1/pets/changes?after=start HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
        "Accept: text/event-stream\r\n\r\n"
    )
    await sleep(2_000)
    expect(received).toBeGreaterThan(0)
    const signalled = Date.now()
    const { code } = await server.kill("SIGTERM")
    expect(code).toBe(0)
    expect(Date.now() - signalled).toBeLessThan(15_000)
    socket.destroy()
  }, 90_000)
})
