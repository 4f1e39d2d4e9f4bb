/**
 * Another process holds the SQLite write lock (as `sqlite3`'s `BEGIN IMMEDIATE`, a `petstore keys` command or a backup
 * would): the executable keeps answering what needs no write at once — `/healthz`, reads, a key's first use (whose
 * `last used` is written later, and whose failure is only logged) — while creates wait up to DB_QUERY_TIMEOUT, then
 * answer 503 `unavailable` with `Retry-After`; once the lock is free, creates succeed, those that were waiting too.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { holdWriteLock } from "./support/lock.js"
import { createKey, scratchDirectory, startPetstore, stopAll } from "./support/petstore.js"

const QUERY_TIMEOUT_MS = 2000
const LOCK_MS = 5000

const timed = async (request: () => Promise<Response>) => {
  const started = Date.now()
  const response = await request()
  const body = await response.text()
  return { response, body: body === "" ? undefined : JSON.parse(body), ms: Date.now() - started, at: Date.now() }
}

describe("another process holds the write lock", () => {
  afterAll(stopAll)

  it("health and reads answer at once, creates wait up to DB_QUERY_TIMEOUT then 503 with Retry-After, and succeed once it is free", async () => {
    const database = `${scratchDirectory()}/contention.db`
    const { key } = createKey(database)
    const server = await startPetstore({
      database,
      env: { DB_QUERY_TIMEOUT: `${QUERY_TIMEOUT_MS} millis`, LOG_LEVEL: "info" }
    })
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
    const create = (name: string) =>
      timed(() =>
        fetch(`${server.origin}/v1/pets`, { method: "POST", headers, body: JSON.stringify({ name, categoryId: 1 }) })
      )

    const lock = await holdWriteLock(database, LOCK_MS)
    // Six creates wait for the lock; meanwhile what needs no write answers in milliseconds. The key is used for the
    // first time: its `last used` is due, and cannot be written now.
    const creates = Promise.all(Array.from({ length: 6 }, (_, i) => create(`Locked ${i}`)))
    await new Promise((done) => setTimeout(done, 200))
    const health = await Promise.all(Array.from({ length: 5 }, () => timed(() => fetch(`${server.origin}/healthz`))))
    const ready = await timed(() => fetch(`${server.origin}/readyz`))
    const read = await timed(() => fetch(`${server.origin}/v1/pets`, { headers }))
    for (const answer of [...health, ready, read]) {
      expect(answer.response.status).toBe(200)
      expect(answer.ms).toBeLessThan(1000)
    }

    // The creates gave up after DB_QUERY_TIMEOUT, while the lock was still held.
    for (const answer of await creates) {
      expect(answer.response.status).toBe(503)
      expect(answer.body).toEqual({ code: "unavailable", message: expect.any(String), status: 503 })
      expect(answer.response.headers.get("retry-after")).toBe("1")
      expect(answer.ms).toBeGreaterThanOrEqual(QUERY_TIMEOUT_MS - 100)
      expect(answer.at).toBeLessThan(lock.lockedAt + LOCK_MS)
    }

    // A create that starts shortly before the lock is released waits for it and succeeds.
    await new Promise((done) => setTimeout(done, Math.max(0, lock.lockedAt + LOCK_MS - 1000 - Date.now())))
    const waited = await create("Waited")
    expect(waited.response.status).toBe(201)
    expect(waited.at).toBeGreaterThanOrEqual(lock.lockedAt + LOCK_MS - 100)
    await lock.released
    expect((await create("After")).response.status).toBe(201)

    // `last used` could not be written during the lock: logged, not failed; the pets listed are exactly the acknowledged ones.
    expect(server.output()).toContain("could not record the last use of an API key")
    const listed = await (await fetch(`${server.origin}/v1/pets`, { headers })).json() as Array<{ name: string }>
    expect(listed.map((pet) => pet.name)).toEqual(["Waited", "After"])
    expect((await server.kill("SIGTERM")).code).toBe(0)
  })
})
