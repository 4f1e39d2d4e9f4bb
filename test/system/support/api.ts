/**
 * The API over raw persistent connections, for the system tests that load the server: create, list, walk.
 */
import { expect } from "@effect/vitest"
import type { Pet } from "../../../src/Domain/Pet.js"
import { expectPage, nextLink } from "../../support/checks.js"
import { Connection, type RawResponse } from "./raw.js"

export const STATUSES = ["available", "pending", "sold"] as const

export interface NewPetBody {
  readonly name: string
  readonly categoryId: number
  readonly status: (typeof STATUSES)[number]
}

export const createPet = (connection: Connection, key: string, pet: NewPetBody): Promise<RawResponse> =>
  connection.request(
    "POST",
    "/v1/pets",
    { authorization: `Bearer ${key}`, "content-type": "application/json" },
    JSON.stringify(pet)
  )

export const listPets = (connection: Connection, key: string, target: string): Promise<RawResponse> =>
  connection.request("GET", target, { authorization: `Bearer ${key}` })

/** Every pet, following `Link: rel="next"`; each page checked (well-formed pets, ascending, within the limit). */
export const walk = async (port: number, key: string, query = "limit=100") => {
  const connection = await Connection.open(port)
  try {
    const limit = Number(new URLSearchParams(query).get("limit") ?? 20)
    const pets: Array<Pet> = []
    let next: string | undefined = `/v1/pets?${query}`
    while (next !== undefined) {
      const page = await listPets(connection, key, next)
      expect(page.status, page.text).toBe(200)
      const pets_ = expectPage(page.json, { limit, ...(pets.length > 0 ? { after: pets[pets.length - 1].id } : {}) })
      next = nextLink(page.headers.link ?? null)
      if (next !== undefined) expect(pets_.length).toBe(limit)
      pets.push(...pets_)
    }
    return pets
  } finally {
    connection.close()
  }
}
