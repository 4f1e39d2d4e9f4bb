/**
 * The catalogue's storage. Standard SQL only (`INSERT … RETURNING`, keyset pages on the primary key), the same
 * statements on both backends. On PostgreSQL they go through `@effect/sql` and rows are decoded into the `Pet` the API
 * answers with (its BIGINTs arrive as strings). On SQLite they are prepared once on the database itself and run
 * synchronously; their rows are already `Pet`s (INTEGER ids, NOT NULL columns, a CHECK on status), so they are not
 * decoded again.
 */
import { SqlClient, SqlError, SqlSchema } from "@effect/sql"
import type { Database } from "bun:sqlite"
import { Effect, Option, Schema } from "effect"
import { CategoryId, NewPet, Pet, PetId, PetStatus } from "../Domain/Pet.js"
import { type Statement, statementHooks, type StatementHooks } from "../Observability/Hooks.js"
import { SqliteDatabase } from "../Sqlite.js"

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
   * Adds a pet; the returned row is committed before this succeeds (an autocommitted statement: SQLite with
   * synchronous=FULL, PostgreSQL with synchronous_commit on, its default).
   */
  readonly create: (pet: NewPet) => Effect.Effect<Pet, SqlError.SqlError>
  readonly findById: (id: PetId) => Effect.Effect<Option.Option<Pet>, SqlError.SqlError>
  /** One keyset page in id order; one extra row is read to tell whether another page follows. */
  readonly list: (options: ListOptions) => Effect.Effect<Page, SqlError.SqlError>
}

const COLUMNS = `id, name, category_id AS "categoryId", status`

const statementFailed = (cause: unknown) => new SqlError.SqlError({ cause, message: "Failed to execute statement" })

/** The statements, as observability names them (`Observability/Hooks.ts`). */
const INSERT: Omit<Statement, "system"> = { operation: "INSERT", collection: "pets" }
const SELECT: Omit<Statement, "system"> = { operation: "SELECT", collection: "pets" }
const sqliteStatement = (base: Omit<Statement, "system">, text: string): Statement => ({ ...base, system: "sqlite", text })

/** SQLite: the same statements, prepared once on the database. */
const sqliteRepository = (db: Database, { runStatement: run }: StatementHooks): PetsRepository => {
  const insertSql = sqliteStatement(INSERT, `INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING ${COLUMNS}`)
  const findOneSql = sqliteStatement(SELECT, `SELECT ${COLUMNS} FROM pets WHERE id = ?`)
  const pageSql = sqliteStatement(SELECT, `SELECT ${COLUMNS} FROM pets WHERE id > ? ORDER BY id LIMIT ?`)
  const pageByStatusSql = sqliteStatement(SELECT, `SELECT ${COLUMNS} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`)
  const insert = db.prepare<Pet, [string, number, string]>(insertSql.text!)
  const findOne = db.prepare<Pet, [number]>(findOneSql.text!)
  const page = db.prepare<Pet, [number, number]>(pageSql.text!)
  const pageByStatus = db.prepare<Pet, [string, number, number]>(pageByStatusSql.text!)
  return {
    create: (pet) => run(insertSql, () => insert.get(pet.name, pet.categoryId, pet.status)!, statementFailed),
    findById: (id) => run(findOneSql, () => Option.fromNullable(findOne.get(id)), statementFailed),
    list: (options) =>
      run(
        options.status === undefined ? pageSql : pageByStatusSql,
        (): Page => {
          const after = options.after ?? 0
          const rows = options.status === undefined
            ? page.all(after, options.limit + 1)
            : pageByStatus.all(options.status, after, options.limit + 1)
          const more = rows.length > options.limit
          if (more) rows.length = options.limit
          return { pets: rows, more }
        },
        statementFailed
      )
  }
}

export class PetsRepo extends Effect.Service<PetsRepo>()("Pets/Repo", {
  effect: Effect.gen(function*() {
    const sqlite = yield* Effect.serviceOption(SqliteDatabase)
    const hooks = yield* statementHooks
    if (Option.isSome(sqlite)) return sqliteRepository(sqlite.value, hooks)
    const observe = hooks.observeStatement
    const sql = yield* SqlClient.SqlClient
    const system = sql.onDialectOrElse({ pg: () => "postgresql" as const, orElse: () => "sqlite" as const })
    const portableInsert: Statement = { ...INSERT, system }
    const portableSelect: Statement = { ...SELECT, system }
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
        (effect) => observe(portableInsert, effect),
        Effect.withSpan("PetsRepo.create")
      )

    const findById = (id: PetId): Effect.Effect<Option.Option<Pet>, SqlError.SqlError> =>
      findOne(id).pipe(
        Effect.catchTag("ParseError", Effect.die),
        (effect) => observe(portableSelect, effect),
        Effect.withSpan("PetsRepo.findById", { attributes: { id } })
      )

    const list = (options: ListOptions) =>
      findPage({ limit: options.limit + 1, status: options.status, after: options.after ?? 0 }).pipe(
        Effect.map((rows): Page => ({ pets: rows.slice(0, options.limit), more: rows.length > options.limit })),
        Effect.catchTag("ParseError", Effect.die),
        (effect) => observe(portableSelect, effect),
        Effect.withSpan("PetsRepo.list", { attributes: { ...options } })
      )

    return { create, findById, list } satisfies PetsRepository as PetsRepository
  })
}) {}
