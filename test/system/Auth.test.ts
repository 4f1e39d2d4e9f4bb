/**
 * Auth safety through the real server and the real database file: revoked and unknown keys are refused on every
 * operation, also a key revoked while the server runs; every key that differs from a valid one in one character is
 * refused; and no key's text is anywhere in the database file, its -wal or -shm file, or the server's log.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { createHash, randomBytes } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { expectErrorBody } from "../support/checks.js"
import { secretOf } from "../support/keys.js"
import { createKey, type Petstore, revokeKey, scratchDirectory, startPetstore, stopAll } from "./support/petstore.js"
import { Connection, type RawResponse } from "./support/raw.js"

let database: string
let server: Petstore
let connection: Connection
const keys: Record<
  "valid" | "revokedBefore" | "revokedWhileRunning" | "issuedWhileRunning",
  { key: string; id: string }
> = {} as any
let petId: number

beforeAll(async () => {
  database = join(scratchDirectory(), "petstore.db")
  keys.valid = createKey(database, "valid")
  keys.revokedBefore = createKey(database, "revoked before start")
  keys.revokedWhileRunning = createKey(database, "revoked while running")
  revokeKey(database, keys.revokedBefore.id)
  server = await startPetstore({ database })
  connection = await Connection.open(server.port)
  const created = await operations.createPet(keys.valid.key)
  expect(created.status).toBe(201)
  petId = created.json.id
})

afterAll(async () => {
  connection?.close()
  await stopAll()
})

const as = (key: string | undefined): Record<string, string> =>
  key === undefined ? {} : { authorization: `Bearer ${key}` }

const operations = {
  listPets: (key?: string) => connection.request("GET", "/v1/pets?limit=5", as(key)),
  createPet: (key?: string) =>
    connection.request(
      "POST",
      "/v1/pets",
      { ...as(key), "content-type": "application/json" },
      JSON.stringify({ name: "Guarded", categoryId: 1 })
    ),
  getPet: (key?: string) => connection.request("GET", `/v1/pets/${petId}`, as(key))
}
const OPERATIONS = Object.entries(operations)
const SUCCESS: Record<string, number> = { listPets: 200, createPet: 201, getPet: 200 }

const expectRefused = (response: RawResponse) => {
  expectErrorBody(
    { status: response.status, contentType: response.headers["content-type"] ?? null, body: response.json },
    401,
    "unauthorized"
  )
  expect(response.headers["www-authenticate"]).toMatch(/^Bearer\b/)
}

/** A well-formed key that was never issued: the format of a real one, another id and secret. */
const unknownKey = () => `psk_${randomBytes(6).toString("hex")}_${randomBytes(32).toString("base64url")}`

const KEY_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"

/** The key with its character at `i` replaced by the next one of the alphabet its part uses (so it stays well-formed). */
const withOneCharacterChanged = (key: string, i: number) => {
  const alphabet = i < 4 ? "abcdefghijklmnopqrstuvwxyz_" : i < 17 ? "0123456789abcdef_" : KEY_ALPHABET
  const next = alphabet[(alphabet.indexOf(key[i]) + 1) % alphabet.length]
  return key.slice(0, i) + next + key.slice(i + 1)
}

describe("refused keys", () => {
  for (const [name, operation] of OPERATIONS) {
    it(`${name}: the valid key is accepted; no key, an unknown key and a key revoked before start are 401`, async () => {
      expect((await operation(keys.valid.key)).status).toBe(SUCCESS[name])
      expectRefused(await operation())
      expectRefused(await operation(unknownKey()))
      expectRefused(await operation(keys.revokedBefore.key))
    })
  }

  it("a key revoked with the CLI while the server runs is refused on every operation within a second", async () => {
    for (const [name, operation] of OPERATIONS) {
      expect((await operation(keys.revokedWhileRunning.key)).status).toBe(SUCCESS[name])
    }
    revokeKey(database, keys.revokedWhileRunning.id)
    const deadline = Date.now() + 1000
    for (;;) {
      const statuses: Array<number> = []
      for (const [, operation] of OPERATIONS) statuses.push((await operation(keys.revokedWhileRunning.key)).status)
      if (statuses.every((status) => status === 401) || Date.now() > deadline) break
    }
    for (const [, operation] of OPERATIONS) expectRefused(await operation(keys.revokedWhileRunning.key))
  })

  it("every key that differs from the valid one in one character is refused, on every operation", async () => {
    const key = keys.valid.key
    let tried = 0
    for (let i = 0; i < key.length; i++) {
      const variant = withOneCharacterChanged(key, i)
      expect(variant).not.toBe(key)
      expect(variant.length).toBe(key.length)
      for (const [, operation] of OPERATIONS) {
        expectRefused(await operation(variant))
        tried++
      }
    }
    // Near misses of other kinds: cut short, one character more, another case.
    for (const variant of [key.slice(0, -1), key + "A", key.toUpperCase(), key.toLowerCase(), ` ${key}x`]) {
      if (variant === key) continue
      for (const [, operation] of OPERATIONS) expectRefused(await operation(variant))
    }
    expect(tried).toBe(key.length * 3)
    // The valid key still works after all those refusals.
    expect((await operations.listPets(key)).status).toBe(200)
  })
})

describe("no key in clear text at rest", () => {
  const files = () => ["", "-wal", "-shm"].map((suffix) => database + suffix).filter((file) => existsSync(file))
  const sha256 = (text: string) => createHash("sha256").update(text).digest("hex")

  it("after keys create (also while the server holds the database), no key's text is in the database, -wal or -shm", async () => {
    // Issued while the server runs: its row is still in the -wal file, not yet checkpointed into the database.
    keys.issuedWhileRunning = createKey(database, "issued while running")
    expect((await operations.listPets(keys.issuedWhileRunning.key)).status).toBe(200)
    const stored = files()
    expect(stored).toContain(`${database}-wal`)
    const bytes = Buffer.concat(stored.map((file) => readFileSync(file)))
    for (const { key } of Object.values(keys)) {
      const secret = secretOf(key)
      for (
        const text of [
          key,
          secret,
          secret.slice(0, 16),
          Buffer.from(key).toString("base64"),
          Buffer.from(key).toString("hex")
        ]
      ) {
        expect(bytes.includes(Buffer.from(text)), `a key's text is in the database files`).toBe(false)
        expect(bytes.includes(Buffer.from(text, "utf16le")), `a key's UTF-16 text is in the database files`).toBe(false)
      }
      // What is stored is the hash: the search does read the records.
      expect(bytes.includes(Buffer.from(sha256(key))), "the key's hash is in the database files").toBe(true)
    }
  })

  it("the server's log never carries a key", () => {
    const log = server.output()
    expect(log.length).toBeGreaterThan(0)
    for (const { key } of Object.values(keys)) {
      expect(log).not.toContain(key)
      expect(log).not.toContain(secretOf(key))
    }
  })
})
