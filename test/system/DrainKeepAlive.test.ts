/**
 * The drain a load balancer sees, on the compiled executable: on SIGTERM `/readyz` turns 503 at once while the
 * listener keeps serving for SHUTDOWN_DELAY; keep-alive clients (what every load balancer holds) get every request they
 * send answered, each answer from then on closing its connection; once the delay is over, new connections are refused,
 * and the process exits 0.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Agent, request as httpRequest } from "node:http"
import { createKey, scratchDirectory, startPetstore, stopAll } from "./support/petstore.js"

const DELAY_MS = 2000
const CLIENTS = 6

interface Answer {
  readonly status: number
  readonly connection: string | undefined
  readonly at: number
}

interface Failure {
  readonly error: string
  readonly at: number
  /** Whether the request went on a keep-alive connection that had served one before. */
  readonly reused: boolean
}

/** One request on the agent's keep-alive connections: the answer, or the error of a request that got none. */
const get = (agent: Agent, port: number, path: string, key: string) =>
  new Promise<Answer | Failure>((resolve) => {
    const req = httpRequest(
      { host: "127.0.0.1", port, path, agent, headers: { authorization: `Bearer ${key}` } },
      (res) => {
        res.resume()
        res.on("end", () => resolve({ status: res.statusCode!, connection: res.headers.connection, at: Date.now() }))
      }
    )
    req.on("error", (error: NodeJS.ErrnoException) =>
      resolve({ error: error.code ?? error.message, at: Date.now(), reused: req.reusedSocket }))
    req.end()
  })

describe("SIGTERM with keep-alive clients", () => {
  afterAll(stopAll)

  it("readiness turns 503 at once, the listener serves for SHUTDOWN_DELAY closing each connection after its answer, then refuses, and exits 0", async () => {
    const database = `${scratchDirectory()}/drain-keepalive.db`
    const { key } = createKey(database)
    const server = await startPetstore({ database, env: { SHUTDOWN_DELAY: `${DELAY_MS} millis` } })
    const readiness = await fetch(`${server.origin}/readyz`)
    expect(readiness.status).toBe(200)

    let signalledAt = Number.POSITIVE_INFINITY
    let stop = false
    const answers: Array<Answer> = []
    const lost: Array<Failure> = []
    const client = async () => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 })
      while (!stop) {
        const outcome = await get(agent, server.port, "/v1/pets?limit=1", key)
        if ("error" in outcome) {
          // Once the delay is over, a new connection is refused — or reset, when it was still in the kernel's queue
          // as the listener closed: the server never read it. A request lost on a connection that had served one
          // before, or any failure before the delay is over, is what must not happen.
          const stopped = outcome.at >= signalledAt + DELAY_MS - 100
          if (stopped && !outcome.reused && ["ECONNREFUSED", "ECONNRESET"].includes(outcome.error)) break
          lost.push(outcome)
        } else answers.push(outcome)
        await new Promise((done) => setTimeout(done, 5))
      }
      agent.destroy()
    }
    const clients = Promise.all(Array.from({ length: CLIENTS }, client))
    await new Promise((done) => setTimeout(done, 500))

    signalledAt = Date.now()
    const exited = server.kill("SIGTERM")
    // Readiness, on connections of its own, turns 503 at once.
    let notReadyAt: number | undefined
    while (notReadyAt === undefined && Date.now() < signalledAt + DELAY_MS) {
      const response = await fetch(`${server.origin}/readyz`, { headers: { connection: "close" } }).catch(() =>
        undefined
      )
      if (response?.status === 503) notReadyAt = Date.now()
      else await new Promise((done) => setTimeout(done, 20))
    }
    expect(notReadyAt).toBeDefined()
    expect(notReadyAt! - signalledAt).toBeLessThan(1000)

    const { code } = await exited
    stop = true
    await clients
    expect(code).toBe(0)
    expect(lost).toEqual([])
    // Served during the delay, every answer closing its connection; none after the listener stopped.
    const duringDelay = answers.filter((answer) => answer.at > notReadyAt! + 100)
    expect(duringDelay.length).toBeGreaterThan(CLIENTS)
    for (const answer of duringDelay) {
      expect(answer.status).toBe(200)
      expect(answer.connection).toBe("close")
    }
    expect(Math.max(...answers.map((answer) => answer.at))).toBeGreaterThanOrEqual(signalledAt + DELAY_MS - 500)
  })
})
