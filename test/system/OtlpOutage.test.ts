/**
 * The span exporter of the compiled executable under full load while its collector fails: it hangs (takes requests
 * and never answers them), then answers 500, then recovers. Clients see nothing of it; the exporter holds at most two
 * exports at the collector, each until its timeout, counts what it cannot send as dropped, and exports again as soon
 * as the collector takes data. Memory and descriptors are read from /proc, against the healthy phase.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { getMetricsFromIterator, type PromData } from "prom2javascript"
import { otlpReceiver, type Receiver } from "../support/otlp.js"
import { createKey, freePort, scratchDirectory, startPetstore, stopAll } from "./support/petstore.js"

type Phase = "healthy" | "hang" | "fail" | "recovered"

/** The receiver of `test/support/otlp.ts` as a collector in `phase`: it hangs, answers 500, or takes the spans. */
const enter = (receiver: Receiver, phase: Phase) => {
  receiver.hanging = phase === "hang"
  receiver.status = phase === "fail" ? 500 : 200
  return phase
}

/** The process's resident memory (bytes) and open descriptors, from /proc. */
const processFigures = (pid: number) => {
  const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]
  return { rss: Number(rss) * 1024, fds: readdirSync(`/proc/${pid}/fd`).length }
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))

const MiB = 1024 * 1024

describe("the span exporter while its collector fails", () => {
  afterAll(stopAll)

  it("holds at most two exports, drops and counts what it cannot send, and resumes at the recovery", async () => {
    const scope = Effect.runSync(Scope.make())
    try {
      const receiver = await Effect.runPromise(Scope.extend(otlpReceiver, scope))
      let phase = enter(receiver, "healthy")
      const database = `${scratchDirectory()}/outage.db`
      const { key } = createKey(database)
      const metricsPort = await freePort()
      const server = await startPetstore({
        database,
        env: {
          METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
          // Shorter than the hang: the exports it holds time out within it, and the next ones are tried.
          OTEL_EXPORTER_OTLP_TIMEOUT: "3000",
          OTEL_BSP_SCHEDULE_DELAY: "500"
        }
      })
      const spans = async () => {
        const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()
        const metrics = await getMetricsFromIterator(text.split("\n")[Symbol.iterator]())
        const value = (name: string) => Number((metrics[name]?.data[0] as PromData | undefined)?.value ?? NaN)
        return {
          exported: value("petstore_otel_spans_exported_total"),
          dropped: value("petstore_otel_spans_dropped_total")
        }
      }

      // Full load: clients back to back, each request's status and duration kept by phase.
      const load = { running: true, statuses: new Map<number, number>(), slowest: new Map<Phase, number>(), count: 0 }
      const client = async () => {
        while (load.running && load.count < 400_000) {
          const during = phase
          const started = performance.now()
          const response = await fetch(`${server.origin}/v1/pets?limit=5`, {
            headers: { authorization: `Bearer ${key}` }
          })
          await response.arrayBuffer()
          load.count += 1
          load.statuses.set(response.status, (load.statuses.get(response.status) ?? 0) + 1)
          load.slowest.set(during, Math.max(load.slowest.get(during) ?? 0, performance.now() - started))
        }
      }
      const clients = Array.from({ length: 8 }, client)

      /** The process figures every 100 ms for `ms`, their greatest. */
      const watch = async (ms: number) => {
        let most = { rss: 0, fds: 0 }
        for (const end = Date.now() + ms; Date.now() < end; await sleep(100)) {
          const now = processFigures(server.pid)
          most = { rss: Math.max(most.rss, now.rss), fds: Math.max(most.fds, now.fds) }
        }
        return most
      }

      await sleep(3000) // warm-up: the heap grows to its working size
      const healthy = await watch(3000)
      const beforeOutage = await spans()
      expect(beforeOutage).toMatchObject({ exported: expect.any(Number), dropped: 0 }) // healthy: nothing lost
      expect(beforeOutage.exported).toBeGreaterThan(0)

      phase = enter(receiver, "hang")
      const hung = await watch(10_000)
      phase = enter(receiver, "fail")
      const failing = await watch(7_000)
      const beforeRecovery = await spans()
      phase = enter(receiver, "recovered")
      const recovered = Date.now()
      let resumedAfter = Infinity
      for (let now = await spans(); Date.now() - recovered < 5000; await sleep(100), now = await spans()) {
        if (now.exported > beforeRecovery.exported) {
          resumedAfter = Date.now() - recovered
          break
        }
      }
      const afterRecovery = await watch(1000)
      load.running = false
      await Promise.all(clients)

      const report = {
        requests: receiver.requests,
        healthy,
        hung,
        failing,
        afterRecovery,
        resumedAfter,
        answered: load.count
      }
      console.log(JSON.stringify({ ...report, slowest: Object.fromEntries(load.slowest) }))
      // Every request answered 200, none waiting on an export (a hung one lasts its 3 s timeout).
      expect([...load.statuses.keys()]).toEqual([200])
      for (const phase of ["hang", "fail"] as const) expect(load.slowest.get(phase)).toBeLessThan(3000)
      // Two exports at the collector at most; the ones it held were given up on.
      expect(receiver.requests.mostOpen).toBeLessThanOrEqual(2)
      expect(receiver.requests.abandoned).toBeGreaterThan(0)
      // What could not be sent is counted; the exports resume within 2 s of the recovery.
      expect(beforeRecovery.dropped).toBeGreaterThan(beforeOutage.dropped)
      expect(resumedAfter).toBeLessThan(2000)
      // Bounded: memory and descriptors as in the healthy phase.
      for (const phase of [hung, failing, afterRecovery]) {
        expect(phase.rss - healthy.rss).toBeLessThan(50 * MiB)
        expect(phase.fds - healthy.fds).toBeLessThanOrEqual(20)
      }
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }, 90_000)
})
