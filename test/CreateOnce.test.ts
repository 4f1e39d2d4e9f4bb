/**
 * `PetsRepo.createOnce`, the repository unit behind Idempotency-Key, on each backend (a file-backed SQLite database, on
 * the repositories' own connection, and PostgreSQL): the record of a create is its pet's row (the key, its scope and
 * expiry written with the pet), so the two commit together by construction; a live record answers with its pet; an
 * expired one lets the key be used again; the pruner forgets expired records and keeps their pets. And the migration
 * that moved the records into the pets' rows carries over the records of the table they lived in before.
 */
import { Migrator, SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-bun"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { migrations } from "../src/Database/Migrations.js"
import * as Sql from "../src/Database/Sql.js"
import { type CreateOnceRequest, PetsRepo } from "../src/Pets/Repo.js"
import { describeBackends } from "./support/backends.js"

const request = (overrides: Partial<CreateOnceRequest> = {}): CreateOnceRequest => ({
  pet: { name: "Rex", categoryId: 1, status: "available" },
  scope: "key-a",
  key: "k",
  now: 1_000,
  expiresAt: 61_000,
  ...overrides
})

describeBackends((backend) => {
  const repoOn = Effect.gen(function*() {
    const context = yield* Layer.build(
      PetsRepo.Default.pipe(Layer.provideMerge(Sql.layer(yield* backend.freshDatabase)))
    )
    const count = (where: string) =>
      Effect.map(
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql.unsafe<{ readonly n: number | string }>(`SELECT COUNT(*) AS n FROM pets WHERE ${where}`)),
        (rows) =>
          Number(rows[0].n)
      ).pipe(Effect.orDie, Effect.provide(context))
    return { repo: yield* Effect.provide(PetsRepo, context), count }
  })

  describe("PetsRepo.createOnce", () => {
    it.scoped("creates once, then answers with that pet; an expired record lets the key be used again", () =>
      Effect.gen(function*() {
        const { count, repo } = yield* repoOn
        const first = yield* repo.createOnce(request())
        expect(first._tag).toBe("Created")
        const pet = (first as { pet: unknown }).pet
        // Whatever the retry sends: the repository answers with the pet; the payload is compared by the caller.
        expect(yield* repo.createOnce(request({ pet: { name: "Max", categoryId: 2, status: "sold" } })))
          .toEqual({ _tag: "Recorded", pet })
        expect(yield* count("1 = 1")).toBe(1)
        // The other scope's key of the same text is another key.
        expect((yield* repo.createOnce(request({ scope: "key-b" })))._tag).toBe("Created")
        // At its expiry the record counts as absent: the new create takes the key, the old pet stays without it.
        const later = yield* repo.createOnce(
          request({ now: 61_000, expiresAt: 121_000, pet: { ...request().pet, name: "Ada" } })
        )
        expect(later).toMatchObject({ _tag: "Created", pet: { name: "Ada" } })
        expect(yield* count("1 = 1")).toBe(3)
        expect(yield* count("idempotency_key IS NOT NULL")).toBe(2)
        expect(yield* repo.createOnce(request({ now: 61_001 }))).toMatchObject({
          _tag: "Recorded",
          pet: { name: "Ada" }
        })
        // A create without a key holds none.
        yield* repo.create({ name: "Tom", categoryId: 1, status: "sold" })
        expect(yield* count("idempotency_key IS NOT NULL")).toBe(2)
      }))

    it.scoped("the pruner forgets expired records in batches and keeps their pets", () =>
      Effect.gen(function*() {
        const { count, repo } = yield* repoOn
        for (let i = 0; i < 5; i++) yield* repo.createOnce(request({ key: `old-${i}` }))
        yield* repo.createOnce(request({ key: "new", expiresAt: 200_000 }))
        expect(yield* repo.releaseExpired(61_000, 3)).toEqual({ released: 3, more: true })
        expect(yield* repo.releaseExpired(61_000, 3)).toEqual({ released: 2, more: false })
        expect(yield* repo.releaseExpired(61_000, 3)).toEqual({ released: 0, more: false })
        expect(yield* count("idempotency_key IS NOT NULL")).toBe(1)
        expect(yield* count("1 = 1")).toBe(6)
        // A forgotten key is free.
        expect((yield* repo.createOnce(request({ key: "old-0", now: 61_000 })))._tag).toBe("Created")
      }))

    it.scoped("the pruner's steps pass pets without a record and reach every expired one, also after a live one expires", () =>
      Effect.gen(function*() {
        const { count, repo } = yield* repoOn
        const pruneAll = (now: number) =>
          Effect.iterate({ released: 0, more: true }, {
            while: (total) => total.more,
            body: (total) =>
              Effect.map(repo.releaseExpired(now, 2), (step) => ({
                released: total.released + step.released,
                more: step.more
              }))
          })
        const plain = (n: number) =>
          Effect.forEach(Array.from({ length: n }), () => repo.create({ name: "Tom", categoryId: 1, status: "sold" }))
        yield* plain(5)
        yield* repo.createOnce(request({ key: "a", expiresAt: 2_000 }))
        yield* plain(3)
        yield* repo.createOnce(request({ key: "b", expiresAt: 3_000 }))
        yield* repo.createOnce(request({ key: "c", expiresAt: 4_000 }))
        yield* plain(4)
        expect((yield* pruneAll(2_500)).released).toBe(1)
        expect(yield* count("idempotency_key IS NOT NULL")).toBe(2)
        // Nothing more expired: the steps stop at the live record.
        expect((yield* pruneAll(2_500)).released).toBe(0)
        yield* repo.createOnce(request({ key: "d", expiresAt: 5_000 }))
        yield* plain(3)
        expect((yield* pruneAll(10_000)).released).toBe(3)
        expect(yield* count("idempotency_key IS NOT NULL")).toBe(0)
        expect(yield* count("1 = 1")).toBe(19)
      }))
  })

  describe("PetsRepo.createOnce beside the pruner", () => {
    it.scoped("a record pruned while a create with its key runs: the create goes on and takes the key", () =>
      Effect.gen(function*() {
        const { count, repo } = yield* repoOn
        for (let i = 0; i < 60; i++) {
          const key = `race-${i}`
          yield* repo.createOnce(request({ key, now: 1_000, expiresAt: 2_000 }))
          // The create meets the expired record; the pruner may forget it between the create's statements.
          const [created] = yield* Effect.all([
            repo.createOnce(request({ key, now: 3_000, expiresAt: 63_000 })),
            repo.releaseExpired(3_000, 500)
          ], { concurrency: "unbounded" })
          expect(created._tag).toBe("Created")
        }
        expect(yield* count("idempotency_key IS NOT NULL")).toBe(60)
      }))
  })

  describe("the move of the records into the pets' rows (migration 0005)", () => {
    it.scoped("carries the records of idempotency_keys over to the pets they answered with", () =>
      Effect.gen(function*() {
        const url = yield* backend.freshDatabase
        const before = Object.fromEntries(Object.entries(migrations).filter(([id]) => id < "0005"))
        const client: Layer.Layer<SqlClient.SqlClient, unknown> = backend.name === "SQLite"
          ? SqliteClient.layer({ filename: Redacted.value(url) })
          : PgClient.layer({ url })
        yield* Effect.gen(function*() {
          yield* Migrator.make({})({ loader: Migrator.fromRecord(before) })
          const sql = yield* SqlClient.SqlClient
          yield* sql`INSERT INTO pets (name, category_id, status) VALUES ('Rex', 1, 'sold'), ('Tom', 2, 'pending')`
          yield* sql`INSERT INTO idempotency_keys
            (scope, idempotency_key, fingerprint, status, body, location, created_at, expires_at)
            VALUES ('key-a', 'order-2', 'f', 201, '{}', '/v1/pets/2', 1000, 61000)`
        }).pipe(Effect.provide(client), Effect.orDie)

        const { count, repo } = yield* Effect.gen(function*() {
          const context = yield* Layer.build(PetsRepo.Default.pipe(Layer.provideMerge(Sql.layer(url))))
          const count = Effect.map(
            Effect.flatMap(
              SqlClient.SqlClient,
              (sql) =>
                sql<{ readonly n: number | string }>`SELECT COUNT(*) AS n FROM pets WHERE idempotency_key IS NOT NULL`
            ),
            (rows) => Number(rows[0].n)
          ).pipe(Effect.orDie, Effect.provide(context))
          return { repo: yield* Effect.provide(PetsRepo, context), count }
        })
        expect(yield* count).toBe(1)
        expect(yield* repo.createOnce(request({ key: "order-2", now: 2_000 })))
          .toEqual({ _tag: "Recorded", pet: { id: 2, name: "Tom", categoryId: 2, status: "pending" } })
      }))
  })
})
