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

const createWithKey = (
  connection: Connection,
  key: string,
  idempotencyKey: string,
  pet: object
): Promise<RawResponse> =>
  connection.request(
    "POST",
    "/v1/pets",
    { authorization: `Bearer ${key}`, "content-type": "application/json", "idempotency-key": `"${idempotencyKey}"` },
    JSON.stringify(pet)
  )

const ROUNDS = 3

describe("retries across a SIGKILL", () => {
  it(
    "every create whose answer was lost, retried with its key after the restart, is answered; no pet twice",
    async () => {
      const database = join(scratchDirectory(), "petstore.db")
      const { key } = createKey(database)
      const requests = new Map<
        string,
        { readonly name: string; readonly categoryId: number; readonly status: string }
      >()
      /** Every create answered 201, first or on a retry, by its Idempotency-Key. */
      const answered = new Map<string, Pet>()
      let lostInAll = 0
      let replayedInAll = 0

      for (let round = 1; round <= ROUNDS; round++) {
        const server = await startPetstore({ database, env: { LOG_LEVEL: "warning" } })
        const lost: Array<string> = []
        let acknowledged = 0
        let killed: Promise<unknown> | undefined
        const connections = await Promise.all(Array.from({ length: CONNECTIONS }, () => Connection.open(server.port)))
        await Promise.all(connections.map(async (connection, c) => {
          for (let i = 0;; i++) {
            const idempotencyKey = `r${round}-c${c}-${i}`
            const pet = { name: `round ${round} connection ${c} pet ${i}`, categoryId: 1 + c, status: STATUSES[i % 3] }
            requests.set(idempotencyKey, pet)
            let response
            try {
              response = await createWithKey(connection, key, idempotencyKey, pet)
            } catch {
              lost.push(idempotencyKey)
              return
            }
            expect(response.status, response.text).toBe(201)
            answered.set(idempotencyKey, response.json)
            if (++acknowledged === 100 * round + 37) killed = server.kill("SIGKILL")
          }
        }))
        expect(await killed).toEqual({ code: null, signal: "SIGKILL" })
        expect(lost.length).toBe(CONNECTIONS)
        lostInAll += lost.length

        // The restart, and every lost request retried with its key and its body.
        const restarted = await startPetstore({ database, env: { LOG_LEVEL: "warning" } })
        const connection = await Connection.open(restarted.port)
        for (const idempotencyKey of lost) {
          const retry = await createWithKey(connection, key, idempotencyKey, requests.get(idempotencyKey)!)
          expect(retry.status, retry.text).toBe(201)
          expect(retry.json).toMatchObject(requests.get(idempotencyKey)!)
          if (retry.headers["idempotent-replayed"] === "true") replayedInAll++
          answered.set(idempotencyKey, retry.json)
        }
        // An acknowledged create, retried, is its recorded answer.
        const [someKey, somePet] = [...answered].find(([k]) => k.startsWith(`r${round}-`))!
        const again = await createWithKey(connection, key, someKey, requests.get(someKey)!)
        expect(again.headers["idempotent-replayed"]).toBe("true")
        expect(again.json).toEqual(somePet)
        expect(again.headers.location).toBe(`/v1/pets/${somePet.id}`)
        connection.close()

        // Every request is there exactly once, with the id its (first or replayed) answer gave.
        const stored = await walk(restarted.port, key)
        expect(stored.length).toBe(answered.size)
        const byName = new Map(stored.map((pet) => [pet.name, pet]))
        expect(byName.size).toBe(stored.length)
        for (const pet of answered.values()) expect(byName.get(pet.name)).toEqual(pet)
        await restarted.kill("SIGTERM")
      }
      console.info(
        `${lostInAll} answers lost to the kills; ${replayedInAll} of them had been committed and were replayed`
      )
    },
    180_000
  )
})
