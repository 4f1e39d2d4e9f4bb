/**
 * Idempotency and rate limits across two replicas of the executable on one PostgreSQL database: a key used on replica A
 * and retried on replica B is replayed; a quota of N/minute holds for both together. Needs `TEST_DATABASE_URL`.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { parseList } from "structured-headers"
import { postgresOnly, withAdmin } from "../support/backends.js"
import { type Petstore, run, startPetstore, stopAll } from "./support/petstore.js"

const SERVER_URL = process.env.TEST_DATABASE_URL
const database = `retries_${randomBytes(6).toString("hex")}`
const databaseUrl = (() => {
  if (SERVER_URL === undefined) return ""
  const url = new URL(SERVER_URL)
  url.pathname = `/${database}`
  return url.href
})()

const QUOTA = 40

beforeAll(async () => {
  if (SERVER_URL === undefined) return
  await Effect.runPromise(withAdmin(SERVER_URL, (sql) => sql`CREATE DATABASE ${sql(database)}`))
})

afterAll(async () => {
  await stopAll()
  if (SERVER_URL !== undefined) {
    await Effect.runPromise(withAdmin(SERVER_URL, (sql) => sql`DROP DATABASE IF EXISTS ${sql(database)} WITH (FORCE)`))
  }
})

const issueKey = (name: string) => {
  const lines = run(["keys", "create", "--name", name], { DATABASE_URL: databaseUrl }).stdout.trim().split("\n")
  return lines.at(-1)!.trim()
}

const create = (replica: Petstore, key: string, body: object, idempotencyKey?: string) =>
  fetch(`${replica.origin}/v1/pets`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${key}`,
      "content-type": "application/json",
      ...(idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey })
    },
    body: JSON.stringify(body)
  })

const remaining = (response: Response) => {
  const [[, params]] = parseList(response.headers.get("ratelimit")!)
  return params.get("r") as number
}

describe.skipIf(SERVER_URL === undefined)(
  postgresOnly("two replicas on one PostgreSQL database: retries and quotas"),
  () => {
    let a: Petstore
    let b: Petstore

    // Every test below uses both replicas, whichever runs first.
    beforeAll(async () => {
      // One after the other: the first migrates.
      a = await startPetstore({ database: databaseUrl, env: { RATE_LIMIT: `${QUOTA}/minute`, LOG_LEVEL: "warning" } })
      b = await startPetstore({ database: databaseUrl, env: { RATE_LIMIT: `${QUOTA}/minute`, LOG_LEVEL: "warning" } })
    }, 60_000)

    it("both replicas are ready on the one database, and each sees a key the command line created", async () => {
      const key = issueKey("ready")
      for (const replica of [a, b]) {
        expect((await fetch(`${replica.origin}/readyz`)).status).toBe(200)
        const listed = await fetch(`${replica.origin}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
        expect(listed.status).toBe(200)
      }
    })

    it("a key used on replica A and retried on replica B is replayed", async () => {
      const key = issueKey("replayed")
      const pet = { name: "Across", categoryId: 9 }
      const first = await create(a, key, pet, "across-replicas")
      expect(first.status).toBe(201)
      const retry = await create(b, key, pet, "\"across-replicas\"")
      expect(retry.status).toBe(201)
      expect(retry.headers.get("idempotent-replayed")).toBe("true")
      expect(retry.headers.get("location")).toBe(first.headers.get("location"))
      expect(await retry.json()).toEqual(await first.json())
      const reused = await create(b, key, { ...pet, name: "Other" }, "across-replicas")
      expect(reused.status).toBe(422)
    })

    it(`a quota of ${QUOTA}/minute admits ${QUOTA} requests across both replicas, then 429 on both`, async () => {
      const key = issueKey("quota")
      // Both replicas at once, 60 requests each: exactly QUOTA are admitted (the counter is one row, updated atomically).
      const answers = await Promise.all(
        Array.from({ length: 120 }, (_, i) => create(i % 2 === 0 ? a : b, key, { name: `quota ${i}`, categoryId: 1 }))
      )
      const admitted = answers.filter((response) => response.status === 201)
      const refused = answers.filter((response) => response.status === 429)
      expect(admitted.length).toBe(QUOTA)
      expect(refused.length).toBe(120 - QUOTA)
      expect(new Set(admitted.map(remaining))).toEqual(new Set(Array.from({ length: QUOTA }, (_, i) => i)))
      for (const response of refused) {
        expect(Number(response.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
        expect(remaining(response)).toBe(0)
      }
      for (const replica of [a, b]) {
        expect((await create(replica, key, { name: "late", categoryId: 1 })).status).toBe(
          429
        )
      }
    })
  }
)
