/**
 * The catalogue's storage. Standard SQL only (`INSERT … RETURNING`, keyset pages on the primary key), so the same
 * repository serves SQLite and PostgreSQL; rows are decoded into the same `Pet` the API answers with.
 */
import { SqlClient, type SqlError, SqlSchema } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { CategoryId, NewPet, Pet, PetId, PetStatus } from "../Domain/Pet.js"

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

export class PetsRepo extends Effect.Service<PetsRepo>()("Pets/Repo", {
  effect: Effect.gen(function*() {
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

    /**
     * Adds a pet; the returned row is committed before this succeeds (an autocommitted statement: SQLite with
     * synchronous=FULL, PostgreSQL with synchronous_commit on, its default).
     */
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

    /** One keyset page in id order; one extra row is read to tell whether another page follows. */
    const list = (options: ListOptions) =>
      findPage({ limit: options.limit + 1, status: options.status, after: options.after ?? 0 }).pipe(
        Effect.map((rows): Page => ({ pets: rows.slice(0, options.limit), more: rows.length > options.limit })),
        Effect.catchTag("ParseError", Effect.die),
        Effect.withSpan("PetsRepo.list", { attributes: { ...options } })
      )

    return { create, findById, list } as const
  })
}) {}
