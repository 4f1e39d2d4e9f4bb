/**
 * Graceful drain, on the compiled executable: under a steady stream of creates and lists, SIGTERM lets every request
 * that the server accepted finish with its real answer, then closes the database and exits 0, and every acknowledged
 * pet is stored. "Accepted" is read from the server's own request log: each request carries its own X-Request-Id.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { connect } from "node:net"
import { createKey, scratchDirectory, startPetstore, stopAll } from "./support/petstore.js"

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))

/**
 * A create whose body arrives in two parts: the server has accepted and started it when the first part is sent, and
 * cannot finish it before the second. Resolves with the raw response text, or the socket error.
 */
const slowCreate = (origin: string, key: string) => {
  const { hostname, port } = new URL(origin)
  const socket = connect(Number(port), hostname)
  let response = ""
  const done = new Promise<string>((resolve) => {
    socket.on("data", (chunk) => (response += chunk))
    socket.on("end", () => resolve(response))
    socket.on("error", (error) => resolve(`error: ${error.message}`))
  })
  const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`
  socket.write(
    `POST /v1/pets HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${key}\r\n` +
      "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
      chunk("{\"name\": \"Slow\",")
  )
  return { finish: () => socket.write(chunk(" \"categoryId\": 7}") + "0\r\n\r\n"), response: done }
}

// A steady stream, not a flood: Bun reads signals from the same event loop as the sockets, and a loop kept saturated
// by new connections can leave a SIGTERM unread for seconds (a load balancer would have stopped sending by then).
const WORKERS = 8
const PAUSE_MS = 5

interface Outcome {
  readonly status: number
  readonly body: any
}

describe("SIGTERM under load", () => {
  afterAll(stopAll)

  it("answers every accepted request with its real answer, stores every acknowledged pet, and exits 0", async () => {
    const database = `${scratchDirectory()}/drain.db`
    const { key } = createKey(database)
    const server = await startPetstore({ database })
    const answered = new Map<string, Outcome>()
    const failed = new Set<string>()
    let stopping = false

    const worker = async (n: number) => {
      for (let i = 0;; i++) {
        const id = `drain-${n}-${i}`
        // One connection per request, so that a request is either read by the server or not at all.
        const headers = {
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
          connection: "close",
          "x-request-id": id
        }
        const request = i % 2 === 0
          ? fetch(`${server.origin}/v1/pets`, {
            method: "POST",
            headers,
            body: JSON.stringify({ name: `Worker ${n} pet ${i}`, categoryId: n + 1 })
          })
          : fetch(`${server.origin}/v1/pets?limit=5`, { headers })
        const outcome = await request.then(
          async (response) => ({ status: response.status, body: await response.json() }),
          () => undefined
        )
        if (outcome !== undefined) answered.set(id, outcome)
        else {
          failed.add(id)
          if (stopping) return
        }
        await sleep(PAUSE_MS)
      }
    }

    const workers = Array.from({ length: WORKERS }, (_, n) => worker(n))
    await sleep(800)
    stopping = true
    const signalled = Date.now()
    const { code } = await server.kill("SIGTERM")
    expect(Date.now() - signalled).toBeLessThan(10_000)
    await Promise.all(workers)
    expect(code).toBe(0)

    const log = server.output().split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line))
    const messages = log.map((entry) => entry.message)
    expect(messages).toContain("draining")
    expect(messages.indexOf("stopped")).toBeGreaterThan(messages.indexOf("draining"))
    const accepted = new Map<string, number>(
      log
        .filter((entry) => entry.message === "request" && String(entry.annotations.requestId).startsWith("drain-"))
        .map((entry) => [entry.annotations.requestId, entry.annotations.status])
    )
    expect(accepted.size).toBeGreaterThan(20)

    // Every request the server accepted was answered, with a 2xx, and the client received that answer.
    for (const [id, status] of accepted) {
      expect(status, id).toBeGreaterThanOrEqual(200)
      expect(status, id).toBeLessThan(300)
      expect(answered.get(id)?.status, id).toBe(status)
    }
    // A request the client saw fail was never accepted.
    for (const id of failed) expect(accepted.has(id), id).toBe(false)
    expect(failed.size).toBeGreaterThan(0)

    // Every 201 is in the database, with the fields it was acknowledged with.
    const created = [...answered.values()].filter((outcome) => outcome.status === 201).map((outcome) => outcome.body)
    expect(created.length).toBeGreaterThan(0)
    const restarted = await startPetstore({ database })
    const stored = new Map<number, unknown>()
    let next: string | undefined = "/v1/pets?limit=100"
    while (next !== undefined) {
      const response: Response = await fetch(`${restarted.origin}${next}`, {
        headers: { authorization: `Bearer ${key}` }
      })
      for (const pet of (await response.json()) as Array<{ id: number }>) stored.set(pet.id, pet)
      next = /^<([^>]+)>; rel="next"$/.exec(response.headers.get("link") ?? "")?.[1]
    }
    expect((await restarted.kill("SIGTERM")).code).toBe(0)
    for (const pet of created) expect(stored.get(pet.id)).toEqual(pet)
  })
})

describe("SIGTERM with a request in flight", () => {
  afterAll(stopAll)

  it("stops accepting at once, completes the request in flight with its real answer, then exits 0", async () => {
    const database = `${scratchDirectory()}/inflight.db`
    const { key } = createKey(database)
    const server = await startPetstore({ database })
    const slow = slowCreate(server.origin, key)
    await sleep(300)
    const exit = server.kill("SIGTERM")
    await sleep(500)
    // Draining: no new connection is accepted, and the process waits for the request in flight.
    const refused = await fetch(`${server.origin}/healthz`).then(() => false, () => true)
    expect(refused).toBe(true)
    expect(server.alive()).toBe(true)
    slow.finish()
    const response = await slow.response
    expect(response).toMatch(/^HTTP\/1\.1 201 /)
    expect(response).toContain("\"name\":\"Slow\"")
    expect((await exit).code).toBe(0)

    const restarted = await startPetstore({ database })
    const pets = await fetch(`${restarted.origin}/v1/pets`, { headers: { authorization: `Bearer ${key}` } }).then((r) =>
      r.json()
    )
    await restarted.kill("SIGTERM")
    expect(pets).toMatchObject([{ name: "Slow", categoryId: 7, status: "available" }])
  })

  it("cuts off what is still in flight after SHUTDOWN_TIMEOUT, logs it, and exits 0", async () => {
    const database = `${scratchDirectory()}/timeout.db`
    const { key } = createKey(database)
    const server = await startPetstore({ database, env: { SHUTDOWN_TIMEOUT: "300 millis" } })
    const slow = slowCreate(server.origin, key)
    await sleep(300)
    const started = Date.now()
    expect((await server.kill("SIGTERM")).code).toBe(0)
    expect(Date.now() - started).toBeLessThan(5_000)
    expect(await slow.response).not.toMatch(/^HTTP\/1\.1 2/)
    expect(server.output()).toContain("shutdown timeout")
  })
})
