/**
 * Structured logs of the compiled executable: one JSON line per request with the request id, method, path (never the
 * query), status, duration and key id (never the key); a start-up line with the address, database and version;
 * LOG_LEVEL honoured.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { resolve } from "node:path"
import { createKey, scratchDirectory, startPetstore, stopAll } from "./support/petstore.js"

const VERSION = JSON.parse(readFileSync(resolve(import.meta.dirname, "../../package.json"), "utf8")).version

const lines = (output: string) =>
  output.split("\n").filter((line) => line.startsWith("{")).map((line) =>
    JSON.parse(line) as {
      message: string
      logLevel: string
      timestamp: string
      annotations: Record<string, unknown>
    }
  )

describe("logs", () => {
  afterAll(stopAll)

  it("JSON lines: start-up, then one line per request with its fields, and never the key", async () => {
    const database = `${scratchDirectory()}/logs.db`
    const { id: keyId, key } = createKey(database)
    const server = await startPetstore({ database })
    await fetch(`${server.origin}/v1/pets?limit=5&status=sold`, {
      headers: { authorization: `Bearer ${key}`, "x-request-id": "log-1" }
    })
    await fetch(`${server.origin}/v1/pets`, { headers: { authorization: "Bearer not-a-key", "x-request-id": "log-2" } })
    await fetch(`${server.origin}/v1/nowhere?token=secret`, { headers: { "x-request-id": "log-3" } })
    expect((await server.kill("SIGTERM")).code).toBe(0)

    const output = server.output()
    const log = lines(output)
    const startup = log.find((line) => line.message === "petstore is listening")!
    expect(startup.annotations).toMatchObject({ version: VERSION, database, address: server.origin })

    const requests = new Map(
      log.filter((line) => line.message === "request").map((line) => [line.annotations.requestId, line])
    )
    const listed = requests.get("log-1")!
    expect(listed.logLevel).toBe("INFO")
    expect(Date.parse(listed.timestamp)).not.toBeNaN()
    expect(listed.annotations).toMatchObject({ method: "GET", path: "/v1/pets", status: 200, keyId })
    expect(listed.annotations.durationMs).toEqual(expect.any(Number))
    expect(requests.get("log-2")!.annotations).toMatchObject({ status: 401 })
    expect(requests.get("log-2")!.annotations.keyId).toBeUndefined()
    expect(requests.get("log-3")!.annotations).toMatchObject({ path: "/v1/nowhere", status: 404 })
    // Neither the key, nor the Authorization header, nor a query string reach the log.
    expect(output).not.toContain(key)
    expect(output).not.toContain(key.slice(`psk_${keyId}_`.length))
    expect(output).not.toContain("not-a-key")
    expect(output).not.toContain("secret")
    expect(output).not.toContain("status=sold")
  })

  it("LOG_LEVEL=warning leaves the request lines out; LOG_FORMAT=pretty is not JSON", async () => {
    const quiet = await startPetstore({ database: `${scratchDirectory()}/quiet.db`, env: { LOG_LEVEL: "warning" } })
    await fetch(`${quiet.origin}/healthz`)
    expect((await quiet.kill("SIGTERM")).code).toBe(0)
    expect(quiet.output()).not.toContain("\"request\"")
    expect(quiet.output()).not.toContain("is listening")

    const pretty = await startPetstore({ database: `${scratchDirectory()}/pretty.db`, env: { LOG_FORMAT: "pretty" } })
    expect((await pretty.kill("SIGTERM")).code).toBe(0)
    expect(pretty.output()).toMatch(/INFO .*petstore is listening/)
    expect(lines(pretty.output())).toEqual([])
  })
})
