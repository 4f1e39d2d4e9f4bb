/**
 * The database layer: the backend that DATABASE_URL selects, migrations that replicas starting together apply once,
 * the bounded start-up against an unreachable PostgreSQL, and the service's answers while PostgreSQL is down or silent
 * (503 within seconds, never a hang) and after it is back (recovered, without a restart).
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Logger, Redacted } from "effect"
import { createServer } from "node:net"
import { migrations } from "../src/Database/Migrations.js"
import { healsWithTime } from "../src/Database/Postgres.js"
import * as Sql from "../src/Database/Sql.js"
import { describePostgres, SQLite } from "./support/backends.js"
import { authorized, testServerOn } from "./support/http.js"
import { makeProxy } from "./support/proxy.js"

const dialectOf = (url: Redacted.Redacted<string>) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => Effect.succeed(sql.onDialectOrElse({ pg: () => "pg", sqlite: () => "sqlite", orElse: () => "other" }))
  ).pipe(
    Effect.provide(Sql.layer(url))
  )

/** A port on 127.0.0.1 that nothing listens on. */
const closedPort = Effect.async<number>((resume) => {
  const server = createServer().listen(0, "127.0.0.1", () => {
    const { port } = server.address() as { port: number }
    server.close(() => resume(Effect.succeed(port)))
  })
})

/** The log lines (logfmt) of an effect. */
const withLogsIn = (lines: Array<string>) =>
  Effect.provide(Logger.replace(Logger.defaultLogger, Logger.map(Logger.logfmtLogger, (line) => lines.push(line))))

/** The database layer with short PostgreSQL timeouts, as the environment sets them (`DB_*_TIMEOUT`). */
const withTimeouts = (url: Redacted.Redacted<string>, startup = "5 seconds") =>
  Sql.layer(url).pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromJson({
    DB_CONNECT_TIMEOUT: "1 second",
    DB_QUERY_TIMEOUT: "1 second",
    DB_STARTUP_TIMEOUT: startup
  }))))

describe("the backend DATABASE_URL selects", () => {
  it.scoped("a file path is SQLite", () =>
    Effect.gen(function*() {
      expect(yield* dialectOf(yield* SQLite.freshDatabase)).toBe("sqlite")
      expect(yield* dialectOf(Redacted.make(":memory:"))).toBe("sqlite")
    }))

  it("the start-up line shows a PostgreSQL URL without its password", () => {
    expect(Sql.describeDatabase(Redacted.make("postgres://app:s3cret@db.internal:6543/pets?sslmode=require")))
      .toBe("postgresql://db.internal:6543/pets")
    expect(Sql.describeDatabase(Redacted.make("/data/petstore.db"))).toBe("/data/petstore.db")
  })
})

describe("start-up with PostgreSQL unreachable", () => {
  it("waits out what time can cure (no answer, starting up, too many connections), never a refusal", () => {
    for (const sqlState of [undefined, "57P03", "53300", "08006", "57014"]) expect(healsWithTime(sqlState)).toBe(true)
    for (const sqlState of ["28P01", "28000", "3D000", "42501", "42P01"]) expect(healsWithTime(sqlState)).toBe(false)
  })

  it.scopedLive("retries for the start-up timeout, then fails naming the server and never the password", () =>
    Effect.gen(function*() {
      const port = yield* closedPort
      const password = "not-to-be-seen-9f3a"
      const logged: Array<string> = []
      const started = Date.now()
      const error = yield* Layer.build(
        withTimeouts(Redacted.make(`postgres://petstore:${password}@127.0.0.1:${port}/catalogue`), "2 seconds")
      ).pipe(Effect.flip, withLogsIn(logged))
      const elapsed = Date.now() - started
      expect(error._tag).toBe("DatabaseUnavailable")
      expect(error.message).toContain(`127.0.0.1:${port}/catalogue`)
      expect(elapsed).toBeGreaterThanOrEqual(2000)
      expect(elapsed).toBeLessThan(6000)
      expect(logged.length).toBeGreaterThanOrEqual(2)
      expect(logged.join("\n")).toContain(`127.0.0.1:${port}`)
      expect([error.message, String(error), ...logged].join("\n")).not.toContain(password)
    }))
})

describePostgres((postgres, url) => {
  it.scoped("postgres:// and postgresql:// URLs are PostgreSQL", () =>
    Effect.gen(function*() {
      const fresh = Redacted.value(yield* postgres.freshDatabase)
      expect(yield* dialectOf(Redacted.make(fresh))).toBe("pg")
      expect(yield* dialectOf(Redacted.make(fresh.replace(/^postgres:/, "postgresql:")))).toBe("pg")
    }))

  it.scopedLive("replicas that start at the same moment apply the migrations once, and all start", () =>
    Effect.gen(function*() {
      const fresh = yield* postgres.freshDatabase
      const logged: Array<string> = []
      const started = yield* Effect.all(
        Array.from({ length: 6 }, () => Effect.as(Layer.build(Sql.layer(fresh)), true)),
        { concurrency: "unbounded" }
      ).pipe(withLogsIn(logged))
      expect(started).toEqual([true, true, true, true, true, true])
      // At the first attempt: none of them failed and had to retry (the start-up retry would hide a race).
      expect(logged.filter((line) => line.includes("level=WARN"))).toEqual([])
      const rows = yield* Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql<{ migration_id: number }>`SELECT migration_id FROM effect_sql_migrations ORDER BY migration_id`
      ).pipe(
        Effect.provide(Sql.layer(fresh))
      )
      expect(rows.map((row) => row.migration_id)).toEqual(Object.keys(migrations).map((id) => Number(id.split("_")[0])))
    }))

  describe("while PostgreSQL is unreachable", () => {
    const target = new URL(url)

    /** The application on a fresh database reached through a proxy the test can cut. */
    const behindProxy = Effect.gen(function*() {
      const fresh = new URL(Redacted.value(yield* postgres.freshDatabase))
      const proxy = yield* makeProxy({ host: target.hostname, port: Number(target.port || 5432) })
      fresh.host = `127.0.0.1:${proxy.port}`
      const server = yield* testServerOn(withTimeouts(Redacted.make(fresh.href)))
      const get = (path: string) => Effect.promise(() => server.fetch(path, authorized(server.key)))
      const post = (body: unknown) =>
        Effect.promise(() =>
          server.fetch("/v1/pets", authorized(server.key, { method: "POST", body: JSON.stringify(body) }))
        )
      return { proxy, get, post }
    })

    /** The status and error code of an answer, and how long it took. */
    const timed = (request: Effect.Effect<Response>) =>
      Effect.gen(function*() {
        const started = Date.now()
        const response = yield* request
        const body = yield* Effect.promise(() => response.json() as Promise<any>)
        return { status: response.status, code: body.code as string | undefined, body, ms: Date.now() - started }
      })

    /** Polls until the answer is 200 (the pool reconnects by itself); how long it took. */
    const recovered = (request: Effect.Effect<Response>) =>
      Effect.gen(function*() {
        const started = Date.now()
        while (Date.now() - started < 10_000) {
          const answer = yield* timed(request)
          if (answer.status === 200) return Date.now() - started
          yield* Effect.sleep("100 millis")
        }
        return Infinity
      })

    for (const mode of ["refuse", "blackhole"] as const) {
      const what = mode === "refuse" ? "down (connections refused)" : "silent (nothing answers)"
      it.scopedLive(
        `${what}: /readyz and the API answer 503 unavailable within seconds, then recover`,
        () =>
          Effect.gen(function*() {
            const { get, post, proxy } = yield* behindProxy
            expect((yield* timed(get("/readyz"))).status).toBe(200)
            const before = yield* timed(post({ name: "Before", categoryId: 1 }))
            expect(before.status).toBe(201)

            yield* proxy.set(mode)
            const ready = yield* timed(get("/readyz"))
            expect(ready).toMatchObject({ status: 503, code: "unavailable" })
            expect(ready.ms).toBeLessThan(3_000)
            for (
              const request of [
                get("/v1/pets"),
                post({ name: "During", categoryId: 1 }),
                get(`/v1/pets/${before.body.id}`)
              ]
            ) {
              const answer = yield* timed(request)
              expect(answer).toMatchObject({ status: 503, code: "unavailable", body: { status: 503 } })
              expect(answer.ms).toBeLessThan(4_000)
            }

            yield* proxy.set("open")
            expect(yield* recovered(get("/readyz"))).toBeLessThan(10_000)
            expect(yield* recovered(get("/v1/pets"))).toBeLessThan(10_000)
            const after = yield* timed(post({ name: "After", categoryId: 1 }))
            expect(after.status).toBe(201)
            const list = yield* timed(get("/v1/pets"))
            expect(list.body.map((pet: { name: string }) => pet.name)).toEqual(["Before", "After"])
          }),
        60_000
      )
    }
  })
})
