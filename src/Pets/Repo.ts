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
import { type Statement, type StatementHooks, statementHooks } from "../Observability/Hooks.js"
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

/** What a create sent with an `Idempotency-Key` answered: kept to answer its retries alike. */
export interface RecordedAnswer {
  readonly status: number
  /** The body, as sent. */
  readonly body: string
  readonly location: string | null
}

export interface IdempotencyRecord extends RecordedAnswer {
  /** The digest of the decoded payload it answered. */
  readonly fingerprint: string
}

export interface CreateOnceRequest {
  readonly pet: NewPet
  /** Whose key it is: the id of the API key that sent it. */
  readonly scope: string
  readonly key: string
  readonly fingerprint: string
  /** Milliseconds since the epoch: records that expire by then count as absent. */
  readonly now: number
  readonly expiresAt: number
  /** The answer to record for the new pet. */
  readonly answer: (pet: Pet) => RecordedAnswer
}

export type CreateOnceResult =
  | { readonly _tag: "Created"; readonly pet: Pet }
  | { readonly _tag: "Recorded"; readonly record: IdempotencyRecord }
  /** Another transaction holds the key (PostgreSQL: another request, on any replica). */
  | { readonly _tag: "InUse" }

export interface PetsRepository {
  /**
   * Adds a pet; the returned row is durably committed before this succeeds (SQLite: the writer's group commit with
   * synchronous=FULL; PostgreSQL: an autocommitted statement with synchronous_commit on, its default).
   */
  readonly create: (pet: NewPet) => Effect.Effect<Pet, SqlError.SqlError>
  /**
   * A create sent with an idempotency key, as one unit: in ONE transaction, the key's live record is read; if there is
   * none, the pet and the record of its answer are inserted, so a committed pet always has its record. On PostgreSQL the
   * transaction first takes a transaction-scoped advisory lock on (scope, key) without waiting: a request that finds it
   * taken is told `InUse`, on whichever replica it runs.
   */
  readonly createOnce: (request: CreateOnceRequest) => Effect.Effect<CreateOnceResult, SqlError.SqlError>
  readonly findById: (id: PetId) => Effect.Effect<Option.Option<Pet>, SqlError.SqlError>
  /** One keyset page in id order; one extra row is read to tell whether another page follows. */
  readonly list: (options: ListOptions) => Effect.Effect<Page, SqlError.SqlError>
}

const COLUMNS = `id, name, category_id AS "categoryId", status`
const RECORD_COLUMNS = "fingerprint, status, body, location"
const INSERT_RECORD = `INSERT INTO idempotency_keys
  (scope, idempotency_key, fingerprint, status, body, location, created_at, expires_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (scope, idempotency_key) DO UPDATE SET
    fingerprint = excluded.fingerprint, status = excluded.status, body = excluded.body,
    location = excluded.location, created_at = excluded.created_at, expires_at = excluded.expires_at
  WHERE idempotency_keys.expires_at <= excluded.created_at`
const SELECT_RECORD =
  `SELECT ${RECORD_COLUMNS} FROM idempotency_keys WHERE scope = ? AND idempotency_key = ? AND expires_at > ?`
/** `?` placeholders as PostgreSQL numbers them. */
const numbered = (statement: string) => {
  let n = 0
  return statement.replace(/\?/g, () => `$${++n}`)
}

const recordValues = (request: CreateOnceRequest, pet: Pet) => {
  const answer = request.answer(pet)
  return [
    request.scope,
    request.key,
    request.fingerprint,
    answer.status,
    answer.body,
    answer.location,
    request.now,
    request.expiresAt
  ] as const
}

const statementFailed = (cause: unknown) => new SqlError.SqlError({ cause, message: "Failed to execute statement" })

/** The statements, as observability names them (`Observability/Hooks.ts`). */
const INSERT: Omit<Statement, "system"> = { operation: "INSERT", collection: "pets" }
const SELECT: Omit<Statement, "system"> = { operation: "SELECT", collection: "pets" }
const sqliteStatement = (base: Omit<Statement, "system">, text: string): Statement => ({
  ...base,
  system: "sqlite",
  text
})

/**
 * SQLite: the same statements, prepared once: the reads on the reading connection, the writes (and the read of a
 * record, which must see the state they write on) on the writer's, run in its group commit.
 */
const sqliteRepository = (
  db: Database,
  writer: Writer,
  { observeStatement: observe, runStatement: run }: StatementHooks
): PetsRepository => {
  const insertSql = sqliteStatement(
    INSERT,
    `INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING ${COLUMNS}`
  )
  const findOneSql = sqliteStatement(SELECT, `SELECT ${COLUMNS} FROM pets WHERE id = ?`)
  const pageSql = sqliteStatement(SELECT, `SELECT ${COLUMNS} FROM pets WHERE id > ? ORDER BY id LIMIT ?`)
  const pageByStatusSql = sqliteStatement(
    SELECT,
    `SELECT ${COLUMNS} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`
  )
  const createOnceSql: Statement = { system: "sqlite", operation: "INSERT", collection: "pets", text: INSERT_RECORD }
  const insert = writer.database.prepare<Pet, [string, number, string]>(insertSql.text!)
  const findOne = db.prepare<Pet, [number]>(findOneSql.text!)
  const page = db.prepare<Pet, [number, number]>(pageSql.text!)
  const pageByStatus = db.prepare<Pet, [string, number, number]>(pageByStatusSql.text!)
  const selectRecord = writer.database.prepare<IdempotencyRecord, [string, string, number]>(SELECT_RECORD)
  const insertRecord = writer.database.prepare(INSERT_RECORD)
  /**
   * The statements of an idempotent create, run as one unit of the writer: inside its transaction, under its write
   * lock, so the read and the writes see one state of the file (an earlier unit of the same transaction included).
   */
  const createOnceStatements = (request: CreateOnceRequest): CreateOnceResult => {
    const record = selectRecord.get(request.scope, request.key, request.now)
    if (record !== null) return { _tag: "Recorded", record }
    const pet = insert.get(request.pet.name, request.pet.categoryId, request.pet.status)!
    insertRecord.run(...recordValues(request, pet))
    return { _tag: "Created", pet }
  }
  return {
    createOnce: (request) => observe(createOnceSql, writer.write(() => createOnceStatements(request))),
    create: (pet) => observe(insertSql, writer.write(() => insert.get(pet.name, pet.categoryId, pet.status)!)),
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
    const writer = yield* Effect.serviceOption(SqliteWriter)
    const hooks = yield* statementHooks
    if (Option.isSome(sqlite) && Option.isSome(writer)) return sqliteRepository(sqlite.value, writer.value, hooks)
    // No `Effect.withSpan` around these per-request methods: it captures a stack trace and copies the request's context
    // on every call, traced or not; `@effect/sql`'s span of the statement is the request's child span.
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

    // Transaction-scoped, so it goes with the transaction whatever happens; a 64-bit hash of the pair names it.
    const tryLock = (request: CreateOnceRequest) =>
      sql.onDialectOrElse({
        pg: () =>
          Effect.map(
            sql<{ readonly locked: boolean }>`SELECT pg_try_advisory_xact_lock(
              hashtextextended(${request.scope} || ' ' || ${request.key}, 0)) AS locked`,
            (rows) => rows[0]?.locked === true
          ),
        orElse: () => Effect.succeed(true)
      })

    const createOnce = (request: CreateOnceRequest) =>
      Effect.gen(function*() {
        if (!(yield* tryLock(request))) return { _tag: "InUse" } as const
        const found = yield* sql.unsafe<IdempotencyRecord>(numbered(SELECT_RECORD), [
          request.scope,
          request.key,
          request.now
        ])
        if (found.length > 0) {
          const record = found[0]
          return { _tag: "Recorded", record: { ...record, status: Number(record.status) } } as const
        }
        const pet = yield* create(request.pet)
        yield* sql.unsafe(numbered(INSERT_RECORD), [...recordValues(request, pet)])
        return { _tag: "Created", pet } as const
      }).pipe(sql.withTransaction) satisfies Effect.Effect<CreateOnceResult, SqlError.SqlError>

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
            WHERE ${
          sql.and(status === undefined ? [sql`id > ${after}`] : [sql`status = ${status}`, sql`id > ${after}`])
        }
            ORDER BY id LIMIT ${limit}`
    })

    const create = (pet: NewPet) =>
      insert(pet).pipe(
        Effect.catchTags({ ParseError: Effect.die, NoSuchElementException: Effect.die }),
        (effect) => observe(portableInsert, effect)
      )

    const findById = (id: PetId): Effect.Effect<Option.Option<Pet>, SqlError.SqlError> =>
      findOne(id).pipe(
        Effect.catchTag("ParseError", Effect.die),
        (effect) => observe(portableSelect, effect)
      )

    const list = (options: ListOptions) =>
      findPage({ limit: options.limit + 1, status: options.status, after: options.after ?? 0 }).pipe(
        Effect.map((rows): Page => ({ pets: rows.slice(0, options.limit), more: rows.length > options.limit })),
        Effect.catchTag("ParseError", Effect.die),
        (effect) => observe(portableSelect, effect)
      )

    return { create, createOnce, findById, list } satisfies PetsRepository as PetsRepository
  })
}) {}
