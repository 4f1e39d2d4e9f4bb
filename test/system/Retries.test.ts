/**
 * Safe retries against the executable: creates sent with an `Idempotency-Key` while the process is killed with SIGKILL;
 * after the restart every request whose answer was lost is retried with its key. Each is then answered (created now,
 * or the recorded answer of the create that committed before the kill), and no pet exists twice.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { join } from "node:path"
import type { Pet } from "../../src/Domain/Pet.js"
import { STATUSES, walk } from "./support/api.js"
import { createKey, scratchDirectory, startPetstore, stopAll } from "./support/petstore.js"
import { Connection, type RawResponse } from "./support/raw.js"

afterAll(stopAll)

const CONNECTIONS = 16

const createWithKey = (connection: Connection, key: string, idempotencyKey: string, pet: object): Promise<RawResponse> =>
  connection.request(
    "POST",
    "/v1/pets",
    { authorization: `Bearer ${key}`, "content-type": "application/json", "idempotency-key": `"${idempotencyKey}"` },
    JSON.stringify(pet)
  )

describe("retries across a SIGKILL", () => {
  it("every create whose answer was lost, retried with its key after the restart, is answered; no pet twice", async () => {
    const database = join(scratchDirectory(), "petstore.db")
    const { key } = createKey(database)
    const server = await startPetstore({ database, env: { LOG_LEVEL: "warning" } })

    const requests = new Map<string, { readonly name: string; readonly categoryId: number; readonly status: string }>()
    const acknowledged = new Map<string, Pet>()
    const lost: Array<string> = []
    let killed: Promise<unknown> | undefined
    const connections = await Promise.all(Array.from({ length: CONNECTIONS }, () => Connection.open(server.port)))
    await Promise.all(connections.map(async (connection, c) => {
      for (let i = 0;; i++) {
        const idempotencyKey = `c${c}-r${i}`
        const pet = { name: `connection ${c} pet ${i}`, categoryId: 1 + c, status: STATUSES[i % 3] }
        requests.set(idempotencyKey, pet)
        let response
        try {
          response = await createWithKey(connection, key, idempotencyKey, pet)
        } catch {
          lost.push(idempotencyKey)
          return
        }
        expect(response.status, response.text).toBe(201)
        acknowledged.set(idempotencyKey, response.json)
        if (acknowledged.size === 300) killed = server.kill("SIGKILL")
      }
    }))
    expect(await killed).toEqual({ code: null, signal: "SIGKILL" })
    expect(lost.length).toBe(CONNECTIONS)

    const restarted = await startPetstore({ database, env: { LOG_LEVEL: "warning" } })
    const connection = await Connection.open(restarted.port)
    let replayed = 0
    for (const idempotencyKey of lost) {
      const retry = await createWithKey(connection, key, idempotencyKey, requests.get(idempotencyKey)!)
      expect(retry.status, retry.text).toBe(201)
      expect(retry.json).toMatchObject(requests.get(idempotencyKey)!)
      if (retry.headers["idempotent-replayed"] === "true") replayed++
    }
    // An acknowledged create, retried, is its recorded answer.
    const [someKey, somePet] = [...acknowledged][0]
    const again = await createWithKey(connection, key, someKey, requests.get(someKey)!)
    expect(again.headers["idempotent-replayed"]).toBe("true")
    expect(again.json).toEqual(somePet)
    expect(again.headers.location).toBe(`/v1/pets/${somePet.id}`)
    connection.close()

    const stored = await walk(restarted.port, key)
    const names = stored.map((pet) => pet.name)
    expect(new Set(names).size).toBe(names.length)
    expect(stored.length).toBe(acknowledged.size + lost.length)
    for (const pet of acknowledged.values()) expect(names).toContain(pet.name)
    console.info(`${lost.length} answers lost to the kill; ${replayed} of them had been committed and were replayed`)
    await restarted.kill("SIGTERM")
  }, 120_000)
})
