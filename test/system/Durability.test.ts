/**
 * Once petstore said 201, the pet exists, whatever happens next. The executable runs on a database file while
 * connections fire creates at it; it is killed with SIGKILL in the middle of that stream, restarted on the same file,
 * and every acknowledged pet must be there with the same fields, nothing must be there that was not sent, and new ids
 * must be above every id handed out before. Three rounds, each killed at a different point.
 *
 * SIGKILL loses the process, not the machine: what it proves is that a 201 follows the commit. That the commit is on
 * the disk (power loss) rests on `synchronous = FULL` in WAL mode (src/Database/Sqlite.ts and SqliteWalSync.ts), which loopback cannot test.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { join } from "node:path"
import type { Pet } from "../../src/Domain/Pet.js"
import { createPet, STATUSES, walk } from "./support/api.js"
import { createKey, scratchDirectory, startPetstore, stopAll } from "./support/petstore.js"
import { Connection } from "./support/raw.js"

afterAll(stopAll)

const ROUNDS = 3
const CONNECTIONS = 16

describe("durability under SIGKILL", () => {
  it("every acknowledged pet survives a SIGKILL mid-stream, with its fields, and no id is handed out twice", async () => {
    const database = join(scratchDirectory(), "petstore.db")
    const { key } = createKey(database)
    /** Every pet the server acknowledged with a 201, by id. */
    const acknowledged = new Map<number, Pet>()
    /** Every pet a request asked for, by its (unique) name: an unacknowledged one may or may not exist. */
    const sent = new Map<string, { readonly categoryId: number; readonly status: string }>()
    let lost = 0

    for (let round = 1; round <= ROUNDS + 1; round++) {
      const server = await startPetstore({ database, env: { LOG_LEVEL: "warning" } })
      const stored = await walk(server.port, key)

      // Everything acknowledged is there, as it was acknowledged; everything there was sent; no id twice.
      const byId = new Map(stored.map((pet) => [pet.id, pet]))
      expect(byId.size).toBe(stored.length)
      for (const [id, pet] of acknowledged) expect(byId.get(id as Pet["id"]), `acknowledged pet ${id}`).toEqual(pet)
      for (const pet of stored) {
        const request = sent.get(pet.name)
        expect(request, `stored pet ${pet.id} was never sent`).toBeDefined()
        expect({ categoryId: pet.categoryId, status: pet.status }).toEqual(request)
      }
      const highest = Math.max(0, ...stored.map((pet) => pet.id))
      if (round > ROUNDS) {
        // After the last kill: one more create gets an id above everything before.
        const connection = await Connection.open(server.port)
        const created = await createPet(connection, key, { name: "after the last kill", categoryId: 1, status: "sold" })
        connection.close()
        expect(created.status).toBe(201)
        expect(created.json.id).toBeGreaterThan(highest)
        await server.kill("SIGTERM")
        break
      }

      // Connections create pets back to back; after `target` acknowledgements the process is killed mid-stream.
      const target = 120 * round + 37
      let acknowledgedThisRound = 0
      let killed: Promise<unknown> | undefined
      const connections = await Promise.all(Array.from({ length: CONNECTIONS }, () => Connection.open(server.port)))
      const firstIds: Array<number> = []
      await Promise.all(connections.map(async (connection, c) => {
        for (let i = 0;; i++) {
          const pet = {
            name: `round ${round} connection ${c} pet ${i}`,
            categoryId: 1 + ((c * 7919 + i) % 1000),
            status: STATUSES[(c + i) % 3]
          }
          sent.set(pet.name, { categoryId: pet.categoryId, status: pet.status })
          let response
          try {
            response = await createPet(connection, key, pet)
          } catch {
            lost++
            return // the connection died with the process: this pet may or may not exist
          }
          expect(response.status, response.text).toBe(201)
          const created: Pet = response.json
          expect(created).toEqual({ id: created.id, ...pet })
          // No id handed out before the restart is handed out again.
          expect(created.id).toBeGreaterThan(highest)
          if (i === 0) firstIds.push(created.id)
          acknowledged.set(created.id, created)
          if (++acknowledgedThisRound === target) killed = server.kill("SIGKILL")
        }
      }))
      expect(killed, "the server was killed").toBeDefined()
      const exit = await killed
      expect(exit).toEqual({ code: null, signal: "SIGKILL" })
      expect(firstIds.length).toBe(CONNECTIONS)
    }

    // Requests were cut off in flight by every kill; the acknowledged ones were all found above.
    expect(lost).toBeGreaterThanOrEqual(ROUNDS)
    expect(acknowledged.size).toBeGreaterThan(ROUNDS * 120)
    // The file really is in WAL mode (synchronous = FULL is per connection and cannot be read from the file).
    const db = new Database(database, { readonly: true })
    expect(db.query("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" })
    db.close()
  })
})
