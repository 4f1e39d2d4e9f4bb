/**
 * The catalogue's storage. Standard SQL only (`INSERT … RETURNING`, keyset pages on the primary key), the same
 * statements on both backends. On PostgreSQL they go through `@effect/sql` and rows are decoded into the `Pet` the API
 * answers with (its BIGINTs arrive as strings). On SQLite they are prepared once on the database itself — the reads on
 * the reading connection, the insert on the writer's, run in its group commit — and their rows are already `Pet`s
 * (INTEGER ids, NOT NULL columns, a CHECK on status), so they are not decoded again.
 */
import { SqlClient, SqlError, SqlSchema } from "@effect/sql"
import type { Database } from "bun:sqlite"
import { Effect, Option, Schema } from "effect"
import { CategoryId, NewPet, Pet, PetId, PetStatus } from "../Domain/Pet.js"
import { SqliteDatabase } from "../Sqlite.js"
import { SqliteWriter, type Writer } from "../SqliteWriter.js"

/** A BIGINT column as the drivers return it: a number from SQLite, a decimal string from PostgreSQL. */
const BigIntColumn = Schema.Union(Schema.Number, Schema.NumberFromString)

/** A row of `pets`: a `Pet` once its 64-bit columns are numbers (ids stay below 2^53, so they are exact). */
const PetRow = Schema.Struct({
  ...Pet.fields,
  id: Schema.compose(BigIntColumn, PetId),
  categoryId: Schema.compose(BigIntColumn, CategoryId)
})

export interface ListOptions {
  readonly limit: number
  readonly status?: PetStatus | undefined
  readonly after?: PetId | undefined
}

export interface Page {
  readonly pets: ReadonlyArray<Pet>
  /** Whether more pets follow the last one of this page. */
  readonly more: boolean
}

export interface PetsRepository {
  /**
   * Adds a pet; the returned row is durably committed before this succeeds (SQLite: the writer's group commit with
   * synchronous=FULL; PostgreSQL: an autocommitted statement with synchronous_commit on, its default).
   */
  readonly create: (pet: NewPet) => Effect.Effect<Pet, SqlError.SqlError>
  readonly findById: (id: PetId) => Effect.Effect<Option.Option<Pet>, SqlError.SqlError>
  /** One keyset page in id order; one extra row is read to tell whether another page follows. */
  readonly list: (options: ListOptions) => Effect.Effect<Page, SqlError.SqlError>
}

const COLUMNS = `id, name, category_id AS "categoryId", status`

const statementFailed = (cause: unknown) => new SqlError.SqlError({ cause, message: "Failed to execute statement" })

/** SQLite: the same statements, prepared once: the reads on the reading connection, the insert on the writer's. */
const sqliteRepository = (db: Database, writer: Writer): PetsRepository => {
  const insert = writer.database.prepare<Pet, [string, number, string]>(
    `INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING ${COLUMNS}`
  )
  const findOne = db.prepare<Pet, [number]>(`SELECT ${COLUMNS} FROM pets WHERE id = ?`)
  const page = db.prepare<Pet, [number, number]>(`SELECT ${COLUMNS} FROM pets WHERE id > ? ORDER BY id LIMIT ?`)
  const pageByStatus = db.prepare<Pet, [string, number, number]>(
    `SELECT ${COLUMNS} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`
  )
  return {
    create: (pet) => writer.write(() => insert.get(pet.name, pet.categoryId, pet.status)!),
    findById: (id) => Effect.try({ try: () => Option.fromNullable(findOne.get(id)), catch: statementFailed }),
    list: (options) =>
      Effect.try({
        try: (): Page => {
          const after = options.after ?? 0
          const rows = options.status === undefined
            ? page.all(after, options.limit + 1)
            : pageByStatus.all(options.status, after, options.limit + 1)
          const more = rows.length > options.limit
          if (more) rows.length = options.limit
          return { pets: rows, more }
        },
        catch: statementFailed
      })
  }
}

export class PetsRepo extends Effect.Service<PetsRepo>()("Pets/Repo", {
  effect: Effect.gen(function*() {
    const sqlite = yield* Effect.serviceOption(SqliteDatabase)
    const writer = yield* Effect.serviceOption(SqliteWriter)
    if (Option.isSome(sqlite) && Option.isSome(writer)) return sqliteRepository(sqlite.value, writer.value)
    const sql = yield* SqlClient.SqlClient
    const columns = sql`id, name, category_id AS "categoryId", status`

    const insert = SqlSchema.single({
      Request: Schema.typeSchema(NewPet),
      Result: PetRow,
      execute: (pet) =>
        sql`INSERT INTO pets (name, category_id, status) VALUES (${pet.name}, ${pet.categoryId}, ${pet.status})
            RETURNING ${columns}`
    })

    const findOne = SqlSchema.findOne({
      Request: PetId,
      Result: PetRow,
      execute: (id) => sql`SELECT ${columns} FROM pets WHERE id = ${id}`
    })

    const findPage = SqlSchema.findAll({
      Request: Schema.Struct({ limit: Schema.Int, status: Schema.optional(PetStatus), after: Schema.Int }),
      Result: PetRow,
      execute: ({ after, limit, status }) =>
        sql`SELECT ${columns} FROM pets
            WHERE ${sql.and(status === undefined ? [sql`id > ${after}`] : [sql`status = ${status}`, sql`id > ${after}`])}
            ORDER BY id LIMIT ${limit}`
    })

    const create = (pet: NewPet) =>
      insert(pet).pipe(
        Effect.catchTags({ ParseError: Effect.die, NoSuchElementException: Effect.die }),
        Effect.withSpan("PetsRepo.create")
      )

    const findById = (id: PetId): Effect.Effect<Option.Option<Pet>, SqlError.SqlError> =>
      findOne(id).pipe(
        Effect.catchTag("ParseError", Effect.die),
        Effect.withSpan("PetsRepo.findById", { attributes: { id } })
      )

    const list = (options: ListOptions) =>
      findPage({ limit: options.limit + 1, status: options.status, after: options.after ?? 0 }).pipe(
        Effect.map((rows): Page => ({ pets: rows.slice(0, options.limit), more: rows.length > options.limit })),
        Effect.catchTag("ParseError", Effect.die),
        Effect.withSpan("PetsRepo.list", { attributes: { ...options } })
      )

    return { create, findById, list } satisfies PetsRepository as PetsRepository
  })
}) {}
