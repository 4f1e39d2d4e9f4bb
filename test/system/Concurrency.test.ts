/**
 * Concurrency through the real server: 2 000 creates over 50 persistent connections, while other connections list.
 * Every create is a 201 with a unique id, each connection sees its ids increase, the ids are exactly 1..2000, and the
 * paginated walk returns exactly those pets once each. No list issued during the writes returns a partial or
 * duplicated page: each page is ascending without duplicates, each pet well-formed, a page with a next link is full,
 * and a walk through the pages never goes back.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { join } from "node:path"
import type { Pet } from "../../src/Domain/Pet.js"
import { expectPage, nextLink } from "../support/checks.js"
import { createPet, listPets, STATUSES, walk } from "./support/api.js"
import { createKey, scratchDirectory, startPetstore, stopAll } from "./support/petstore.js"
import { Connection } from "./support/raw.js"

afterAll(stopAll)

const CREATES = 2000
const WRITERS = 50
const READERS = 4

describe("concurrent creates and lists", () => {
  it(`${CREATES} creates over ${WRITERS} connections, with lists during the writes`, async () => {
    const database = join(scratchDirectory(), "petstore.db")
    const { key } = createKey(database)
    const server = await startPetstore({ database, env: { LOG_LEVEL: "warning" } })

    const created: Array<Pet> = []
    let next = 0
    let writing = true
    const writers = await Promise.all(Array.from({ length: WRITERS }, () => Connection.open(server.port)))
    const readers = await Promise.all(Array.from({ length: READERS }, () => Connection.open(server.port)))

    const write = async (connection: Connection) => {
      const mine: Array<number> = []
      while (next < CREATES) {
        const i = next++
        const pet = { name: `Pet ${i}`, categoryId: 1 + (i % 97), status: STATUSES[i % 3] }
        const response = await createPet(connection, key, pet)
        expect(response.status, response.text).toBe(201)
        expect(response.json).toEqual({ id: response.json.id, ...pet })
        expect(response.headers.location).toBe(`/v1/pets/${response.json.id}`)
        mine.push(response.json.id)
        created.push(response.json)
      }
      // One connection's creates are sequential: each one's id is above the one before.
      for (let j = 1; j < mine.length; j++) expect(mine[j]).toBeGreaterThan(mine[j - 1])
      return mine.length
    }

    let pages = 0
    let walks = 0
    const read = async (connection: Connection, r: number) => {
      for (let n = 0; writing; n++) {
        if ((n + r) % 5 === 0) {
          // A walk during the writes: each page starts after the last, never goes back, never repeats a pet.
          const status = STATUSES[n % 3]
          let target: string | undefined = `/v1/pets?limit=37&status=${status}`
          let last = 0
          while (target !== undefined) {
            const response = await listPets(connection, key, target)
            expect(response.status).toBe(200)
            const page = expectPage(response.json, { limit: 37, after: last, status })
            target = nextLink(response.headers.link ?? null)
            if (target !== undefined) expect(page.length).toBe(37)
            if (page.length > 0) last = page[page.length - 1].id
            pages++
          }
          walks++
        } else {
          const limit = 1 + ((n * 31 + r) % 100)
          const after = created.length === 0 ? 0 : created[(n * 17) % created.length].id
          const status = n % 4 === 3 ? undefined : STATUSES[n % 3]
          const query = `limit=${limit}${after === 0 ? "" : `&after=${after}`}${
            status === undefined ? "" : `&status=${status}`
          }`
          const response = await listPets(connection, key, `/v1/pets?${query}`)
          expect(response.status, response.text).toBe(200)
          const page = expectPage(response.json, { limit, after, ...(status === undefined ? {} : { status }) })
          if (response.headers.link !== undefined) expect(page.length).toBe(limit)
          pages++
        }
      }
    }

    const [counts] = await Promise.all([
      Promise.all(writers.map(write)).finally(() => writing = false),
      Promise.all(readers.map(read)).finally(() => next = CREATES)
    ])
    for (const connection of [...writers, ...readers]) connection.close()

    // Every connection wrote, and the lists ran while it did.
    expect(counts.reduce((a, b) => a + b, 0)).toBe(CREATES)
    expect(counts.every((count) => count > 0)).toBe(true)
    expect(pages).toBeGreaterThan(20)
    expect(walks).toBeGreaterThan(0)

    // Unique ids, exactly 1..2000 on the fresh database (no create failed, none was counted twice).
    const ids = created.map((pet) => pet.id).sort((a, b) => a - b)
    expect(ids).toEqual(Array.from({ length: CREATES }, (_, i) => i + 1))

    // The walk returns exactly those pets, once each, as they were acknowledged.
    const byId = new Map(created.map((pet) => [pet.id, pet]))
    const all = await walk(server.port, key)
    expect(all.map((pet) => pet.id)).toEqual(ids)
    for (const pet of all) expect(pet).toEqual(byId.get(pet.id))
    // And so does each status filter, which together partition them.
    for (const status of STATUSES) {
      const filtered = await walk(server.port, key, `limit=100&status=${status}`)
      expect(filtered).toEqual(all.filter((pet) => pet.status === status))
    }

    expect(server.output()).not.toContain("unexpected failure")
    expect((await server.kill("SIGTERM")).code).toBe(0)
  })
})
