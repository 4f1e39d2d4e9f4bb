/**
 * The pet repository against real SQLite, in memory and on a file: creation, lookup, keyset pages, what the migrations
 * leave behind, and what survives closing and reopening a database file.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Option, Redacted, Schema } from "effect"
import * as Sql from "../src/Database/Sql.js"
import { MAX_SAFE_ID, NewPet, PetId, type PetStatus } from "../src/Domain/Pet.js"
import { type ListOptions, type Page, PetsRepo } from "../src/Pets/Repo.js"
import { describeBackends, postgres, TEST_DATABASE_URL } from "./support/backends.js"
import { tempDatabaseFile } from "./support/files.js"

/** A creation request as the API hands it to the repository: decoded, so trimmed and with the default status. */
const newPet = Schema.decodeUnknownSync(NewPet)

const repoOn = <ROut, E>(database: Layer.Layer<ROut | SqlClient.SqlClient, E>) =>
  PetsRepo.Default.pipe(Layer.provideMerge(database))

/** Adds pets named `Pet 1` … `Pet <count>`, cycling through `statuses`; succeeds with the stored rows. */
const seed = (count: number, statuses: ReadonlyArray<PetStatus> = ["available"]) =>
  Effect.flatMap(PetsRepo, (repo) =>
    Effect.forEach(
      Array.from({ length: count }, (_, i) => i + 1),
      (n) => repo.create(newPet({ name: `Pet ${n}`, categoryId: n, status: statuses[(n - 1) % statuses.length] }))
    ))

/** Every page from the first, following the last id of each page while `more` says another one follows. */
const walk = (options: Omit<ListOptions, "after">) =>
  Effect.gen(function*() {
    const repo = yield* PetsRepo
    const pages: Array<Page> = []
    let after: PetId | undefined
    while (pages.length <= 1000) {
      const page = yield* repo.list({ ...options, after })
      pages.push(page)
      if (!page.more) return pages
      after = page.pets[page.pets.length - 1].id
    }
    return yield* Effect.dieMessage("the keyset walk does not end")
  })

const ids = (page: Page) => page.pets.map((pet) => pet.id)

/** Rows no create stores, written around the service: a category below 1, a name too long, a status not listed. */
const REFUSED_ROWS = [["Rex", -1, "available"], ["x".repeat(201), 1, "available"], ["Rex", 1, "lost"]] as const
/** The message of the defect a read died with, if it died. */
const defectOf = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isFailure(exit) ? Option.map(Cause.dieOption(exit.cause), (defect) => (defect as Error).message) : Option.none()

const databases = [
  ["in memory", Sql.SqlTest],
  ["on a file", Layer.unwrapScoped(Effect.map(tempDatabaseFile, (file) => Sql.layer(Redacted.make(file))))],
  ...(TEST_DATABASE_URL === undefined
    ? []
    : [
      [
        "on PostgreSQL",
        Layer.unwrapScoped(Effect.map(postgres(TEST_DATABASE_URL).freshDatabase, (url) => Sql.layer(url)))
      ] as const
    ])
] as const

for (const [where, database] of databases) {
  describe(`PetsRepo ${where}`, () => {
    const withRepo = Effect.provide(repoOn(database))

    it.effect("a row its schema refuses is a defect on every read (a 500), never cast to a pet", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const repo = yield* PetsRepo
        // The status's CHECK constraint set aside, so that the row can be written at all.
        yield* sql.onDialectOrElse({
          pg: () => sql`ALTER TABLE pets DROP CONSTRAINT pets_status_check`,
          orElse: () => sql`PRAGMA ignore_check_constraints = ON`
        })
        for (const [name, categoryId, status] of REFUSED_ROWS) {
          yield* sql`DELETE FROM pets`
          const [{ id }] = yield* sql<{ readonly id: number }>`INSERT INTO pets (name, category_id, status)
            VALUES (${name}, ${categoryId}, ${status}) RETURNING id`
          const reads: ReadonlyArray<Effect.Effect<unknown, unknown>> = [
            repo.findById(PetId.make(id)),
            repo.list({ limit: 10 }),
            repo.list({ id: PetId.make(id), limit: 1 })
          ]
          for (const read of reads) {
            const message = defectOf(yield* Effect.exit(read))
            expect(Option.getOrElse(message, () => "no defect")).toMatch(/A row of pets \(SELECT\) does not match/)
          }
        }
      }).pipe(withRepo))

    it.effect("create returns the stored row, with increasing ids", () =>
      Effect.gen(function*() {
        const repo = yield* PetsRepo
        const first = yield* repo.create(newPet({ name: "Rex", categoryId: 1, status: "pending" }))
        const second = yield* repo.create(newPet({ name: "Tom", categoryId: 2, status: "sold" }))
        const third = yield* repo.create(newPet({ name: "Kim", categoryId: 3 }))
        expect(first).toEqual({ id: first.id, name: "Rex", categoryId: 1, status: "pending" })
        expect(second).toEqual({ id: second.id, name: "Tom", categoryId: 2, status: "sold" })
        expect(third).toEqual({ id: third.id, name: "Kim", categoryId: 3, status: "available" })
        expect(first.id).toBeGreaterThanOrEqual(1)
        expect(second.id).toBeGreaterThan(first.id)
        expect(third.id).toBeGreaterThan(second.id)
      }).pipe(withRepo))

    it.effect("create stores the decoded request: the name trimmed, the status defaulted to available", () =>
      Effect.gen(function*() {
        const repo = yield* PetsRepo
        const created = yield* repo.create(newPet({ name: " \t Rex the dog \n", categoryId: 7 }))
        expect(created).toEqual({ id: created.id, name: "Rex the dog", categoryId: 7, status: "available" })
        expect(yield* repo.findById(created.id)).toEqual(Option.some(created))
      }).pipe(withRepo))

    it.effect("a category id of 2^53 - 1 round-trips exactly", () =>
      Effect.gen(function*() {
        const repo = yield* PetsRepo
        const created = yield* repo.create(newPet({ name: "Big", categoryId: MAX_SAFE_ID }))
        expect(created.categoryId).toBe(MAX_SAFE_ID)
        expect(Option.map(yield* repo.findById(created.id), (pet) => pet.categoryId)).toEqual(Option.some(MAX_SAFE_ID))
      }).pipe(withRepo))

    it.effect("findById finds a stored pet and nothing for an unknown id", () =>
      Effect.gen(function*() {
        const repo = yield* PetsRepo
        const [rex, tom] = yield* seed(2)
        expect(yield* repo.findById(rex.id)).toEqual(Option.some(rex))
        expect(yield* repo.findById(tom.id)).toEqual(Option.some(tom))
        expect(yield* repo.findById(PetId.make(tom.id + 1))).toEqual(Option.none())
        expect(yield* repo.findById(PetId.make(MAX_SAFE_ID))).toEqual(Option.none())
      }).pipe(withRepo))

    it.effect("list on an empty catalogue is an empty last page", () =>
      Effect.gen(function*() {
        const repo = yield* PetsRepo
        expect(yield* repo.list({ limit: 20 })).toEqual({ feed: expect.anything(), pets: [], more: false })
        expect(yield* repo.list({ limit: 1, status: "sold" })).toEqual({
          feed: expect.anything(),
          pets: [],
          more: false
        })
      }).pipe(withRepo))

    it.effect("list orders by id, honours limit, and says more only when more pets follow", () =>
      Effect.gen(function*() {
        const repo = yield* PetsRepo
        const pets = yield* seed(5)
        expect(yield* repo.list({ limit: 20 })).toEqual({ feed: expect.anything(), pets, more: false })
        expect(yield* repo.list({ limit: 5 })).toEqual({ feed: expect.anything(), pets, more: false })
        expect(yield* repo.list({ limit: 4 })).toEqual({ feed: expect.anything(), pets: pets.slice(0, 4), more: true })
        expect(yield* repo.list({ limit: 1 })).toEqual({ feed: expect.anything(), pets: pets.slice(0, 1), more: true })
      }).pipe(withRepo))

    it.effect("list after an id returns only the pets with greater ids", () =>
      Effect.gen(function*() {
        const repo = yield* PetsRepo
        const pets = yield* seed(5)
        expect(yield* repo.list({ limit: 2, after: pets[1].id })).toEqual({
          feed: expect.anything(),
          pets: pets.slice(2, 4),
          more: true
        })
        expect(yield* repo.list({ limit: 3, after: pets[1].id })).toEqual({
          feed: expect.anything(),
          pets: pets.slice(2),
          more: false
        })
        expect(yield* repo.list({ limit: 20, after: pets[4].id })).toEqual({
          feed: expect.anything(),
          pets: [],
          more: false
        })
        expect(yield* repo.list({ limit: 20, after: PetId.make(MAX_SAFE_ID) })).toEqual({
          feed: expect.anything(),
          pets: [],
          more: false
        })
      }).pipe(withRepo))

    it.effect("list combines the status filter with after", () =>
      Effect.gen(function*() {
        const repo = yield* PetsRepo
        // Statuses cycle available, pending, sold: pets 1, 4, 7, 10 are available; 2, 5, 8 pending; 3, 6, 9 sold.
        const pets = yield* seed(10, ["available", "pending", "sold"])
        const sold = pets.filter((pet) => pet.status === "sold")
        expect(sold.map((pet) => pet.name)).toEqual(["Pet 3", "Pet 6", "Pet 9"])
        const listSold = (options: Omit<ListOptions, "status">) => repo.list({ ...options, status: "sold" })
        expect(yield* listSold({ limit: 20 })).toEqual({ feed: expect.anything(), pets: sold, more: false })
        expect(yield* listSold({ limit: 1, after: sold[0].id })).toEqual({
          feed: expect.anything(),
          pets: [sold[1]],
          more: true
        })
        expect(yield* listSold({ limit: 2, after: sold[0].id })).toEqual({
          feed: expect.anything(),
          pets: sold.slice(1),
          more: false
        })
        // The cursor need not be a pet of that status: after pet 4 (available) come sold pets 6 and 9.
        expect(yield* listSold({ limit: 20, after: pets[3].id })).toEqual({
          feed: expect.anything(),
          pets: sold.slice(1),
          more: false
        })
        expect(yield* repo.list({ limit: 20, status: "pending", after: pets[7].id })).toEqual({
          feed: expect.anything(),
          pets: [],
          more: false
        })
      }).pipe(withRepo))

    it.effect("a keyset walk over 57 pets, 7 at a time, visits every pet exactly once, in order", () =>
      Effect.gen(function*() {
        const pets = yield* seed(57, ["available", "pending", "sold"])
        const pages = yield* walk({ limit: 7 })
        expect(pages.map((page) => page.pets.length)).toEqual([7, 7, 7, 7, 7, 7, 7, 7, 1])
        expect(pages.flatMap(ids)).toEqual(pets.map((pet) => pet.id))

        const pending = pets.filter((pet) => pet.status === "pending")
        const pendingPages = yield* walk({ limit: 7, status: "pending" })
        expect(pending).toHaveLength(19)
        expect(pendingPages.map((page) => page.pets.length)).toEqual([7, 7, 5])
        expect(pendingPages.flatMap((page) => page.pets)).toEqual(pending)
      }).pipe(withRepo))

    it.effect("an id is not handed out again after the newest pet is deleted", () =>
      Effect.gen(function*() {
        const repo = yield* PetsRepo
        const sql = yield* SqlClient.SqlClient
        const [, newest] = yield* seed(2)
        yield* sql`DELETE FROM pets WHERE id = ${newest.id}`
        const next = yield* repo.create(newPet({ name: "Next", categoryId: 1 }))
        expect(next.id).toBeGreaterThan(newest.id)
      }).pipe(withRepo))

    it.effect.skipIf(where === "on PostgreSQL")(
      "the migrations index pets on (status, id)",
      () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const indexes = yield* sql<{ tbl_name: string }>`
          SELECT tbl_name FROM sqlite_master WHERE type = 'index' AND name = 'pets_status_id'`
          expect(indexes).toEqual([{ tbl_name: "pets" }])
          const columns = yield* sql<{ name: string }>`
          SELECT name FROM pragma_index_info('pets_status_id') ORDER BY seqno`
          expect(columns.map((column) => column.name)).toEqual(["status", "id"])
        }).pipe(withRepo)
    )
  })
}

describe("PetsRepo on a database file", () => {
  const open = (file: string) => Effect.provide(repoOn(Sql.layer(Redacted.make(file))))

  it.scoped("the connection is set up for durability: WAL, synchronous FULL, a busy timeout", () =>
    Effect.gen(function*() {
      const file = yield* tempDatabaseFile
      yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        expect(yield* sql`PRAGMA journal_mode`).toEqual([{ journal_mode: "wal" }])
        expect(yield* sql`PRAGMA synchronous`).toEqual([{ synchronous: 2 }])
        expect(yield* sql`PRAGMA busy_timeout`).toEqual([{ timeout: 5000 }])
      }).pipe(open(file))
    }))

  it.scoped("pets created before the database is closed read back identical after it is reopened", () =>
    Effect.gen(function*() {
      const file = yield* tempDatabaseFile
      const created = yield* seed(12, ["available", "pending", "sold"]).pipe(open(file))
      const reread = yield* Effect.gen(function*() {
        const repo = yield* PetsRepo
        const found = yield* Effect.forEach(created, (pet) => repo.findById(pet.id))
        const pages = yield* walk({ limit: 5 })
        return { found, listed: pages.flatMap((page) => page.pets) }
      }).pipe(open(file))
      expect(reread.found).toEqual(created.map(Option.some))
      expect(reread.listed).toEqual(created)
    }))

  it.scoped("ids are never reused after a reopen, even when the newest pet was deleted", () =>
    Effect.gen(function*() {
      const file = yield* tempDatabaseFile
      const newest = yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const [, , newest] = yield* seed(3)
        yield* sql`DELETE FROM pets WHERE id = ${newest.id}`
        return newest
      }).pipe(open(file))
      const next = yield* Effect.flatMap(PetsRepo, (repo) => repo.create(newPet({ name: "Next", categoryId: 1 }))).pipe(
        open(file)
      )
      expect(next.id).toBeGreaterThan(newest.id)
    }))
})

// On each backend: 64-bit ids, concurrent creations, keyset pages, and the page queries' plans.
describeBackends((backend) => {
  /** The repository and its SQL client, on a fresh database. */
  const fresh = Effect.gen(function*() {
    const context = yield* Layer.build(Layer.provideMerge(PetsRepo.Default, Sql.layer(yield* backend.freshDatabase)))
    return { repo: yield* Effect.provide(PetsRepo, context), sql: yield* Effect.provide(SqlClient.SqlClient, context) }
  })

  const pet = (name: string, status: PetStatus = "available"): NewPet => ({ name, categoryId: 1, status })

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
      expect(JSON.stringify(page.pets[1])).toBe(
        `{"id":${next},"name":"Big","categoryId":${MAX_SAFE_ID},"status":"sold"}`
      )
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
      expect(first).toEqual({ feed: expect.anything(), pets: [created[0], created[2]], more: true })
      const second = yield* repo.list({ limit: 2, status: "pending", after: first.pets[1].id })
      expect(second).toEqual({ feed: expect.anything(), pets: [created[4], created[6]], more: false })
      expect(yield* repo.list({ limit: 3, after: created[5].id })).toEqual({
        feed: expect.anything(),
        pets: [created[6]],
        more: false
      })
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
