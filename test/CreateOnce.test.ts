/**
 * `PetsRepo.createOnce`, the repository unit behind Idempotency-Key: the pet and the record of its answer are committed
 * together or not at all, on each backend (a file-backed SQLite database, on the repositories' own connection, and
 * PostgreSQL).
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer } from "effect"
import type { Pet } from "../src/Domain/Pet.js"
import { type CreateOnceRequest, PetsRepo } from "../src/Pets/Repo.js"
import * as Sql from "../src/Sql.js"
import { describeBackends } from "./support/backends.js"

const request = (overrides: Partial<CreateOnceRequest> = {}): CreateOnceRequest => ({
  pet: { name: "Rex", categoryId: 1, status: "available" },
  scope: "key-a",
  key: "k",
  fingerprint: "f1",
  now: 1_000,
  expiresAt: 61_000,
  answer: (pet: Pet) => ({ status: 201, body: JSON.stringify(pet), location: `/v1/pets/${pet.id}` }),
  ...overrides
})

describeBackends((backend) => {
  const repoOn = Effect.gen(function*() {
    const context = yield* Layer.build(
      PetsRepo.Default.pipe(Layer.provideMerge(Sql.layer(yield* backend.freshDatabase)))
    )
    const count = (table: string) =>
      Effect.map(
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql.unsafe<{ readonly n: number | string }>(`SELECT COUNT(*) AS n FROM ${table}`)),
        (rows) =>
          Number(rows[0].n)
      ).pipe(Effect.orDie, Effect.provide(context))
    return { repo: yield* Effect.provide(PetsRepo, context), count }
  })

  describe("PetsRepo.createOnce", () => {
    it.scoped("creates once, then answers the record; an expired record is replaced", () =>
      Effect.gen(function*() {
        const { count, repo } = yield* repoOn
        const first = yield* repo.createOnce(request())
        expect(first._tag).toBe("Created")
        const pet = (first as { pet: Pet }).pet
        const again = yield* repo.createOnce(request({ fingerprint: "f2" }))
        expect(again).toEqual({
          _tag: "Recorded",
          record: { fingerprint: "f1", status: 201, body: JSON.stringify(pet), location: `/v1/pets/${pet.id}` }
        })
        expect(yield* count("pets")).toBe(1)
        // The other scope's key of the same text is another key.
        expect((yield* repo.createOnce(request({ scope: "key-b" })))._tag).toBe("Created")
        // At its expiry the record counts as absent, and a new create replaces it.
        const later = yield* repo.createOnce(request({ now: 61_000, expiresAt: 121_000, fingerprint: "f3" }))
        expect(later._tag).toBe("Created")
        expect(yield* count("pets")).toBe(3)
        expect(yield* count("idempotency_keys")).toBe(2)
        expect(yield* repo.createOnce(request({ now: 61_001 }))).toMatchObject({ record: { fingerprint: "f3" } })
      }))

    it.scoped("the pet and its record commit together or not at all", () =>
      Effect.gen(function*() {
        const { count, repo } = yield* repoOn
        // The record cannot be written (its answer fails after the pet's insert): the pet is rolled back too.
        const failed = yield* Effect.exit(repo.createOnce(request({
          answer: () => {
            throw new Error("cannot record")
          }
        })))
        expect(Exit.isFailure(failed)).toBe(true)
        expect(yield* count("pets")).toBe(0)
        expect(yield* count("idempotency_keys")).toBe(0)
        // The key is still free.
        expect((yield* repo.createOnce(request()))._tag).toBe("Created")
      }))
  })
})
