/**
 * In-process, through the production web handler (the request pipeline): while another connection holds the SQLite write lock, a create answers 503
 * `unavailable` with `Retry-After` after DB_QUERY_TIMEOUT, a read with a key whose `last used` is due answers 200, and
 * once the lock is free a create answers 201. (The executable under another process's lock: test/system/Contention.)
 */
import { describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { ConfigProvider, Effect, Layer, Redacted } from "effect"
import * as Sql from "../src/Database/Sql.js"
import { tempDatabaseFile } from "./support/files.js"
import { authorized, testServerOn } from "./support/http.js"

const queryTimeout = ConfigProvider.fromJson({ DB_QUERY_TIMEOUT: "300 millis" })

describe("under another connection's write lock", () => {
  it.scopedLive("a create answers 503 with Retry-After after DB_QUERY_TIMEOUT, a read 200; a create succeeds once free", () =>
    Effect.gen(function*() {
      const file = yield* tempDatabaseFile
      const server = yield* testServerOn(
        Sql.layer(Redacted.make(file)).pipe(Layer.provide(Layer.setConfigProvider(queryTimeout)))
      )
      const other = new Database(file)
      yield* Effect.addFinalizer(() => Effect.sync(() => other.close()))
      const body = JSON.stringify({ name: "Rex", categoryId: 1 })

      other.run("BEGIN IMMEDIATE")
      const started = Date.now()
      const refused = yield* Effect.promise(() =>
        server.fetch("/v1/pets", authorized(server.key, { method: "POST", body }))
      )
      expect(Date.now() - started).toBeGreaterThanOrEqual(290)
      expect(refused.status).toBe(503)
      expect(refused.headers.get("retry-after")).toBe("1")
      expect(yield* Effect.promise(() => refused.json())).toEqual({
        code: "unavailable",
        message: expect.any(String),
        status: 503
      })
      // The key's first use: its `last used` is due, and is written later, not on this request's path.
      const read = yield* Effect.promise(() => server.fetch("/v1/pets", authorized(server.key)))
      expect(read.status).toBe(200)
      other.run("COMMIT")

      const created = yield* Effect.promise(() =>
        server.fetch("/v1/pets", authorized(server.key, { method: "POST", body }))
      )
      expect(created.status).toBe(201)
    }))
})
