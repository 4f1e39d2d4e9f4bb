/**
 * The change feed's event streams and long polls on the compiled executable, through Bun's listener: an idle stream
 * outlives a proxy's 10-second idle timeout (heartbeats); a long poll waits past `REQUEST_TIMEOUT` (its endpoint's
 * own wait); and on SIGTERM the streams end once `SHUTDOWN_DELAY` is over, the process exiting without waiting
 * `SHUTDOWN_TIMEOUT` for them, nor for one whose request comes after; a stream from the start of 100,000 pets, read as
 * fast as it comes, has every one.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { connect, createServer } from "node:net"
import { readEvents } from "../support/sse.js"
import { createKey, scratchDirectory, startPetstore, stopAll } from "./support/petstore.js"
import { seedPets } from "./support/sqlite.js"

/** A TCP proxy to `port` that cuts a connection after `idleMillis` with nothing sent either way, as proxies do. */
const idleCuttingProxy = (port: number, idleMillis: number) =>
  new Promise<{ readonly port: number; readonly close: () => void }>((resolve) => {
    const server = createServer((client) => {
      const upstream = connect(port, "127.0.0.1")
      client.pipe(upstream).pipe(client)
      const cut = () => {
        client.destroy()
        upstream.destroy()
      }
      for (const socket of [client, upstream]) {
        socket.setTimeout(idleMillis, cut)
        socket.on("error", cut)
        socket.on("close", cut)
      }
    })
    server.listen(
      0,
      "127.0.0.1",
      () => resolve({ port: (server.address() as { port: number }).port, close: () => server.close() })
    )
  })

const streamInit = (key: string): RequestInit => ({
  headers: { authorization: `Bearer ${key}`, accept: "text/event-stream" }
})

/** Short database timeouts, so that REQUEST_TIMEOUT may be short too (it must exceed their sum and a second). */
const SHORT_DEADLINES = { DB_CONNECT_TIMEOUT: "1s", DB_QUERY_TIMEOUT: "1s", REQUEST_TIMEOUT: "4s" }

describe("the change feed through the listener", () => {
  afterAll(stopAll)

  it("an idle stream outlives a proxy's 10-second idle timeout, then delivers", async () => {
    const database = `${scratchDirectory()}/feed.db`
    const { key } = createKey(database)
    const server = await startPetstore({ database, env: SHORT_DEADLINES })
    const proxy = await idleCuttingProxy(server.port, 10_000)
    try {
      const response = await fetch(`http://127.0.0.1:${proxy.port}/v1/pets/changes`, streamInit(key))
      expect(response.status).toBe(200)
      const reader = readEvents(response)
      expect((await reader.next())?.retry).toBeGreaterThan(0)
      const started = Date.now()
      // Past the proxy's idle timeout and REQUEST_TIMEOUT: only heartbeats come, and the stream stays open.
      while (Date.now() - started < 12_000) expect((await reader.next(8_000))?.comment).toBe("heartbeat")
      const created = await fetch(`${server.origin}/v1/pets`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ name: "Late", categoryId: 1 })
      })
      expect(created.status).toBe(201)
      let block = await reader.next()
      while (block?.comment === "heartbeat") block = await reader.next()
      expect(block).toMatchObject({ event: "created" })
      expect(JSON.parse(block!.data!).name).toBe("Late")
      await reader.cancel()
    } finally {
      proxy.close()
    }
  }, 30_000)

  it("a long poll waits past REQUEST_TIMEOUT: its wait is the endpoint's own", async () => {
    const database = `${scratchDirectory()}/feed.db`
    const { key } = createKey(database)
    const server = await startPetstore({ database, env: SHORT_DEADLINES })
    const started = Date.now()
    const response = await fetch(`${server.origin}/v1/pets/changes?wait=6`, {
      headers: { authorization: `Bearer ${key}` }
    })
    expect(response.status).toBe(200)
    expect(((await response.json()) as { changes: unknown }).changes).toEqual([])
    expect(Date.now() - started).toBeGreaterThanOrEqual(5_900)
  }, 20_000)

  it(
    "SIGTERM: the streams end once SHUTDOWN_DELAY is over; the process does not wait SHUTDOWN_TIMEOUT for them",
    async () => {
      const database = `${scratchDirectory()}/feed.db`
      const { key } = createKey(database)
      const server = await startPetstore({ database, env: { SHUTDOWN_DELAY: "1s", SHUTDOWN_TIMEOUT: "60s" } })
      const readers = await Promise.all(
        [1, 2, 3].map(async () => {
          const reader = readEvents(await fetch(`${server.origin}/v1/pets/changes`, streamInit(key)))
          await reader.next()
          return reader
        })
      )
      const signalled = Date.now()
      const exited = server.kill("SIGTERM")
      for (const reader of readers) {
        let block = await reader.next(10_000)
        while (block !== undefined) block = await reader.next(10_000)
      }
      const ended = Date.now() - signalled
      expect(ended).toBeGreaterThanOrEqual(900)
      expect(ended).toBeLessThan(5_000)
      await exited
      expect(Date.now() - signalled).toBeLessThan(10_000)
      expect(server.alive()).toBe(false)
    },
    30_000
  )

  it(
    "a stream whose request comes once the listener has stopped accepting ends at once; the process does not wait for it",
    async () => {
      const database = `${scratchDirectory()}/feed.db`
      const { key } = createKey(database)
      const server = await startPetstore({ database, env: { SHUTDOWN_DELAY: "1s", SHUTDOWN_TIMEOUT: "60s" } })
      // A connection the listener has accepted, its request not yet whole.
      const socket = connect(server.port, "127.0.0.1")
      let answer = ""
      const closed = new Promise<void>((resolve) => {
        socket.on("data", (chunk) => answer += chunk)
        socket.on("close", () => resolve())
        socket.on("error", () => resolve())
      })
      await new Promise<void>((resolve) => socket.on("connect", () => resolve()))
      socket.write(
        `GET /v1/pets/changes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nAccept: text/event-stream\r\n`
      )
      const signalled = Date.now()
      const exited = server.kill("SIGTERM")
      await new Promise((resolve) => setTimeout(resolve, 1_500))
      socket.write("\r\n")
      await closed
      await exited
      expect(Date.now() - signalled).toBeLessThan(10_000)
      // Answered, if at all, with a stream that ended without an event.
      expect(answer).not.toContain("event:")
    },
    30_000
  )

  it("a stream from the start of 100,000 pets, read as fast as it comes, has every one", async () => {
    const database = `${scratchDirectory()}/feed.db`
    const { key } = createKey(database)
    seedPets(database, 100_000)
    const server = await startPetstore({ database })
    const response = await fetch(`${server.origin}/v1/pets/changes?after=start`, streamInit(key))
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
    let text = ""
    let created = 0
    let last = ""
    while (created < 100_000 && !text.includes("event: error")) {
      const read = await reader.read()
      if (read.done) break
      text += read.value
      const end = text.lastIndexOf("\n\n")
      if (end === -1) continue
      for (const block of text.slice(0, end).split("\n\n")) {
        if (block.includes("event: created")) {
          created++
          last = block
        }
      }
      text = text.slice(end + 2)
    }
    await reader.cancel()
    expect(text).not.toContain("event: error")
    expect(created).toBe(100_000)
    expect(last).toContain(".100000\n")
  }, 120_000)
})
