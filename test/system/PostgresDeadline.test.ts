/**
 * PostgreSQL, `pets` locked by another session and the pool exhausted: every request gets an answer — a 503 once the
 * database gives up (the pool's wait, DB_CONNECT_TIMEOUT; the statement's, DB_QUERY_TIMEOUT) — and none has its
 * connection cut, though the waits add up past Bun's default idle timeout of 10 s (the connection's idle timeout is set
 * past REQUEST_TIMEOUT). Needs TEST_DATABASE_URL; reported as skipped without it.
 */
import { PgClient } from "@effect/sql-pg"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Redacted, Scope } from "effect"
import { postgres, postgresOnly, TEST_DATABASE_URL, withSearchPath } from "../support/backends.js"
import { createKey, startPetstore, stopAll } from "./support/petstore.js"

const REQUESTS = 40
const LOCK_MS = 16_000

const title = "a long wait for a locked table is answered, never cut"
const suite = TEST_DATABASE_URL === undefined ? describe.skip : describe

describe("PostgreSQL deadlines", () => {
  afterAll(stopAll)

  suite(postgresOnly(title), () => {
    it("answers all 40 creates with 503 or 201 while another session holds pets, none cut off", async () => {
      const scope = await Effect.runPromise(Scope.make())
      try {
        const url = Redacted.value(
          await Effect.runPromise(Scope.extend(postgres(TEST_DATABASE_URL!).freshDatabase, scope))
        )
        const { key } = createKey(url)
        const server = await startPetstore({
          database: url,
          // A request may wait 8 s for a connection, then 6 s for its statement: 503s come up to 14 s after the start.
          env: { DB_CONNECT_TIMEOUT: "8 seconds", DB_QUERY_TIMEOUT: "6 seconds", REQUEST_TIMEOUT: "16 seconds" }
        })
        const schema = /search_path=(\w+)/.exec(decodeURIComponent(url))![1]
        // Another session locks pets for LOCK_MS.
        const locked = Promise.withResolvers<void>()
        const holder = Effect.runFork(
          Effect.flatMap(PgClient.PgClient, (sql) =>
            sql.withTransaction(
              sql`LOCK TABLE ${sql(schema)}.pets IN ACCESS EXCLUSIVE MODE`.pipe(
                Effect.tap(() => Effect.sync(() => locked.resolve())),
                Effect.zipRight(Effect.sleep(LOCK_MS))
              )
            )).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(withSearchPath(TEST_DATABASE_URL!, schema)) })))
        )
        await locked.promise
        const started = Date.now()
        const outcomes = await Promise.all(
          Array.from({ length: REQUESTS }, (_, i) =>
            fetch(`${server.origin}/v1/pets`, {
              method: "POST",
              headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
              body: JSON.stringify({ name: `Waiting ${i}`, categoryId: 1 })
            }).then(
              async (response) => ({ status: response.status, body: await response.json(), ms: Date.now() - started }),
              (error: Error) => ({ status: 0, body: error.message, ms: Date.now() - started })
            ))
        )
        await Effect.runPromise(Fiber.await(holder))
        for (const outcome of outcomes) {
          expect([201, 503], JSON.stringify(outcome)).toContain(outcome.status)
          if (outcome.status === 503) expect(outcome.body).toMatchObject({ code: "unavailable", status: 503 })
          expect(outcome.ms).toBeLessThan(16_000 + 1000)
        }
        // The waits did add up past Bun's default idle timeout of 10 seconds, and those requests were answered too.
        expect(Math.max(...outcomes.map((outcome) => outcome.ms))).toBeGreaterThan(10_000)
      } finally {
        await Effect.runPromise(Scope.close(scope, Exit.void))
      }
    }, 60_000)
  })
})
