/**
 * The catalogue's repository on each backend: ids are 64-bit in storage and numbers in the API, concurrent creations get
 * distinct ids, keyset pages walk the catalogue in id order, and the page queries are served by an index.
 */
import { SqlClient } from "@effect/sql"
import { expect, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { MAX_SAFE_ID, type NewPet, type PetId } from "../src/Domain/Pet.js"
import { PetsRepo } from "../src/Pets/Repo.js"
import * as Sql from "../src/Sql.js"
import { describeBackends } from "./support/backends.js"

describeBackends((backend) => {
  /** The repository and its SQL client, on a fresh database. */
  const fresh = Effect.gen(function*() {
    const context = yield* Layer.build(Layer.provideMerge(PetsRepo.Default, Sql.layer(yield* backend.freshDatabase)))
    return { repo: yield* Effect.provide(PetsRepo, context), sql: yield* Effect.provide(SqlClient.SqlClient, context) }
  })

  const pet = (name: string, status: NewPet["status"] = "available"): NewPet => ({ name, categoryId: 1, status })

  it.scoped("ids past 32 bits, and the largest category id, come back as exact JSON numbers", () =>
    Effect.gen(function*() {
      const { repo, sql } = yield* fresh
      yield* repo.create(pet("First"))
      const next = 5_000_000_000
      yield* sql.onDialectOrElse({
        pg: () => sql`ALTER TABLE pets ALTER COLUMN id RESTART WITH ${sql.literal(String(next))}`,
        orElse: () => sql`UPDATE sqlite_sequence SET seq = ${next - 1} WHERE name = 'pets'`
      })
      const created = yield* repo.create({ name: "Big", categoryId: MAX_SAFE_ID, status: "sold" })
      expect(created).toEqual({ id: next, name: "Big", categoryId: MAX_SAFE_ID, status: "sold" })
      expect(typeof created.id).toBe("number")
      expect(yield* repo.findById(next as PetId)).toEqual(Option.some(created))
      const page = yield* repo.list({ limit: 10 })
      expect(page.pets.map((p) => p.id)).toEqual([1, next])
      expect(JSON.stringify(page.pets[1])).toBe(`{"id":${next},"name":"Big","categoryId":${MAX_SAFE_ID},"status":"sold"}`)
    }))

  it.scoped("concurrent creations get distinct ids, listed once each in id order", () =>
    Effect.gen(function*() {
      const { repo } = yield* fresh
      const created = yield* Effect.all(
        Array.from({ length: 40 }, (_, i) => repo.create(pet(`Pet ${i}`))),
        { concurrency: "unbounded" }
      )
      const ids = created.map((p) => p.id)
      expect(new Set(ids).size).toBe(40)
      const page = yield* repo.list({ limit: 100 })
      expect(page.more).toBe(false)
      expect(page.pets).toEqual([...created].sort((a, b) => a.id - b.id))
    }))

  it.scoped("keyset pages: `after` continues past the last id, `more` tells whether a page follows", () =>
    Effect.gen(function*() {
      const { repo } = yield* fresh
      const created = yield* Effect.forEach(
        Array.from({ length: 7 }, (_, i) => i),
        (i) => repo.create(pet(`Pet ${i}`, i % 2 === 0 ? "pending" : "sold"))
      )
      const first = yield* repo.list({ limit: 2, status: "pending" })
      expect(first).toEqual({ pets: [created[0], created[2]], more: true })
      const second = yield* repo.list({ limit: 2, status: "pending", after: first.pets[1].id })
      expect(second).toEqual({ pets: [created[4], created[6]], more: false })
      expect(yield* repo.list({ limit: 3, after: created[5].id })).toEqual({ pets: [created[6]], more: false })
    }))

  it.scoped("a page, filtered by status or not, is read through an index, not a scan of the table", () =>
    Effect.gen(function*() {
      const { sql } = yield* fresh
      // The shapes of the repository's page queries.
      const unfiltered = "SELECT id, name, category_id, status FROM pets WHERE id > 0 ORDER BY id LIMIT 21"
      const filtered =
        "SELECT id, name, category_id, status FROM pets WHERE status = 'sold' AND id > 0 ORDER BY id LIMIT 21"
      const plan = (query: string) =>
        sql.onDialectOrElse({
          // An empty table is cheapest to scan: forbid that, and see whether an index can serve the query.
          pg: () =>
            sql.withTransaction(
              Effect.zipRight(
                sql.unsafe("SET LOCAL enable_seqscan = off"),
                sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ${query}`)
              )
            ).pipe(Effect.map((rows) => rows.map((row) => row["QUERY PLAN"]).join("\n"))),
          orElse: () =>
            sql.unsafe<{ detail: string }>(`EXPLAIN QUERY PLAN ${query}`).pipe(
              Effect.map((rows) => rows.map((row) => row.detail).join("\n"))
            )
        })
      const [all, byStatus] = [yield* plan(unfiltered), yield* plan(filtered)]
      yield* sql.onDialectOrElse({
        pg: () =>
          Effect.sync(() => {
            expect(all).toMatch(/Index Scan using pets_pkey/)
            expect(byStatus).toMatch(/Index Scan using pets_status_id/)
          }),
        orElse: () =>
          Effect.sync(() => {
            expect(all).toMatch(/SEARCH pets USING INTEGER PRIMARY KEY \(rowid>\?\)/)
            expect(byStatus).toMatch(/SEARCH pets USING INDEX pets_status_id \(status=\? AND id>\?\)/)
          })
      })
      for (const text of [all, byStatus]) expect(text).not.toMatch(/Seq Scan|SCAN pets\b|TEMP B-TREE/)
    }))
})
