/**
 * The catalogue's storage. Standard SQL only (`INSERT … RETURNING`, keyset pages on the primary key), the same
 * statements on both backends but for pruning expired idempotency records (SQLite walks the ids, PostgreSQL uses its
 * index on the expiry: migration 0006). On PostgreSQL they go through `@effect/sql` and rows are decoded into the
 * `Pet` the API answers with (its BIGINTs arrive as strings). On SQLite they are prepared once on the database itself
 * — the reads on the reading connection, the insert on the writer's, run in its group commit — and their rows are
 * already `Pet`s (INTEGER ids, NOT NULL columns, a CHECK on status), so they are not decoded again.
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

/** A create sent with an `Idempotency-Key`. */
export interface CreateOnceRequest {
  readonly pet: NewPet
  /** Whose key it is: the id of the API key that sent it. */
  readonly scope: string
  readonly key: string
  /** Milliseconds since the epoch: a record that expires by then counts as absent. */
  readonly now: number
  readonly expiresAt: number
}

export type CreateOnceResult =
  | { readonly _tag: "Created"; readonly pet: Pet }
  /** The pet that a create with this key made before, its record still live. */
  | { readonly _tag: "Recorded"; readonly pet: Pet }
  /** Another transaction holds the key (PostgreSQL: another request, on any replica). */
  | { readonly _tag: "InUse" }

/** What a step of pruning did: how many records it forgot, and whether expired records may be left. */
export interface PruneStep {
  readonly released: number
  readonly more: boolean
}

export interface PetsRepository {
  /**
   * Adds a pet; the returned row is durably committed before this succeeds (SQLite: the writer's group commit with
   * synchronous=FULL; PostgreSQL: an autocommitted statement with synchronous_commit on, its default).
   */
  readonly create: (pet: NewPet) => Effect.Effect<Pet, SqlError.SqlError>
  /**
   * A create sent with an idempotency key: the pet is inserted with its key, scope and expiry in its own row (its
   * record), unless a live record holds the key — then that pet is the result. One transaction: a record expired but
   * not yet pruned is released and the pet inserted; so is a record the pruner forgot between the two (`InUse` if
   * the key is still taken then: another transaction took it meanwhile). On PostgreSQL the transaction first takes a
   * transaction-scoped advisory lock on (scope, key) without waiting: a request that finds it taken is told `InUse`,
   * on whichever replica it runs.
   */
  readonly createOnce: (request: CreateOnceRequest) => Effect.Effect<CreateOnceResult, SqlError.SqlError>
  /**
   * One step of pruning: forgets records expired by `now` (their pets stay), a batch at a time — on PostgreSQL up to
   * `batch` records (found by the index on the expiry); on SQLite those among the next `batch` pets in id order, from
   * where the last step stopped (records expire in id order there: migration 0006). On SQLite a unit of the writer, so
   * that a database another process holds is waited for off the event loop.
   */
  readonly releaseExpired: (now: number, batch: number) => Effect.Effect<PruneStep, SqlError.SqlError>
  readonly findById: (id: PetId) => Effect.Effect<Option.Option<Pet>, SqlError.SqlError>
  /** One keyset page in id order; one extra row is read to tell whether another page follows. */
  readonly list: (options: ListOptions) => Effect.Effect<Page, SqlError.SqlError>
}

const COLUMNS = `id, name, category_id AS "categoryId", status`
/** A pet and its record; nothing when a record (live or expired) already holds the key. */
const INSERT_ONCE =
  `INSERT INTO pets (name, category_id, status, idempotency_key, idempotency_scope, idempotency_expires_at)
  VALUES (?, ?, ?, ?, ?, ?)
  ON CONFLICT (idempotency_key, idempotency_scope) WHERE idempotency_key IS NOT NULL DO NOTHING
  RETURNING ${COLUMNS}`
/** The pet whose record holds a key. */
const SELECT_HOLDER = `SELECT ${COLUMNS}, idempotency_expires_at AS "expiresAt" FROM pets
  WHERE idempotency_key = ? AND idempotency_scope = ?`
/** Forgets a pet's record: an expired one that holds a key being used again, and the pruner's. */
const RELEASE_RECORD = `UPDATE pets SET idempotency_key = NULL, idempotency_scope = NULL, idempotency_expires_at = NULL`
const RELEASE_HOLDER = `${RELEASE_RECORD} WHERE id = ?`
/** PostgreSQL: a batch of expired records (the partial index on the expiry finds them). */
const RELEASE_EXPIRED = `${RELEASE_RECORD} WHERE id IN (
  SELECT id FROM pets WHERE idempotency_key IS NOT NULL AND idempotency_expires_at <= ? LIMIT ?)`
/** SQLite: the expired records among a range of ids, and the first record left in it (a live one). */
const RELEASE_EXPIRED_BETWEEN =
  `${RELEASE_RECORD} WHERE id > ? AND id <= ? AND idempotency_key IS NOT NULL AND idempotency_expires_at <= ?`
const FIRST_RECORD_BETWEEN = `SELECT min(id) AS id FROM pets WHERE id > ? AND id <= ? AND idempotency_key IS NOT NULL`
/** `?` placeholders as PostgreSQL numbers them. */
const numbered = (statement: string) => {
  let n = 0
  return statement.replace(/\?/g, () => `$${++n}`)
}
type InsertOnceValues = [
  name: string,
  categoryId: number,
  status: string,
  key: string,
  scope: string,
  expiresAt: number
]
const insertOnceValues = (request: CreateOnceRequest): InsertOnceValues => [
  request.pet.name,
  request.pet.categoryId,
  request.pet.status,
  request.key,
  request.scope,
  request.expiresAt
]

/** A record counts until it expires. */
const isLive = (expiresAt: number, now: number) => expiresAt > now

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
  const createOnceSql = sqliteStatement(INSERT, INSERT_ONCE)
  const insert = writer.database.prepare<Pet, [string, number, string]>(insertSql.text!)
  const findOne = db.prepare<Pet, [number]>(findOneSql.text!)
  const page = db.prepare<Pet, [number, number]>(pageSql.text!)
  const pageByStatus = db.prepare<Pet, [string, number, number]>(pageByStatusSql.text!)
  const insertOnce = writer.database.prepare<Pet, InsertOnceValues>(INSERT_ONCE)
  const selectHolder = writer.database.prepare<Pet & { readonly expiresAt: number }, [string, string]>(SELECT_HOLDER)
  const releaseHolder = writer.database.prepare<unknown, [number]>(RELEASE_HOLDER)
  const releaseBetween = writer.database.prepare<unknown, [number, number, number]>(RELEASE_EXPIRED_BETWEEN)
  const firstRecordBetween = writer.database.prepare<{ readonly id: number | null }, [number, number]>(
    FIRST_RECORD_BETWEEN
  )
  const lastId = writer.database.prepare<{ readonly id: number | null }, []>(`SELECT max(id) AS id FROM pets`)
  /**
   * The pruner's place: no pet at or below this id holds an expired record (as of its last step). It starts at 0 in
   * each process and stops before the first live record; a record written with a longer TTL (before a restart with a
   * shorter one) holds it up, and the records after it wait for its expiry — they count as absent meanwhile.
   */
  let pruned = 0
  const pruneStep = (now: number, batch: number) => {
    const end = pruned + batch
    const released = releaseBetween.run(pruned, end, now).changes
    const live = firstRecordBetween.get(pruned, end)?.id ?? null
    if (live !== null) return { released, more: false, next: live - 1 }
    const last = lastId.get()?.id ?? 0
    return { released, more: end < last, next: Math.min(end, last) }
  }
  /**
   * The pets created with a key in the transactions not settled yet, an id range per transaction (one writer: a
   * transaction's pets have consecutive ids): a retry whose key one of them holds is `InUse`, as the advisory lock
   * makes it on PostgreSQL. A range is dropped when its transaction settles (`Writer.whenSettled`), so a create costs
   * a comparison and an assignment, and a transaction one callback.
   */
  const unsettled: Array<{ readonly transaction: number; readonly first: number; last: number }> = []
  const created = (pet: Pet): CreateOnceResult => {
    const transaction = writer.currentTransaction()
    const latest = unsettled.at(-1)
    if (latest?.transaction === transaction) latest.last = pet.id
    else {
      const range = { transaction, first: pet.id, last: pet.id }
      unsettled.push(range)
      writer.whenSettled(() => unsettled.splice(unsettled.indexOf(range), 1))
    }
    return { _tag: "Created", pet }
  }
  const isUnsettled = (id: number) => unsettled.some((range) => id >= range.first && id <= range.last)
  /**
   * The statements of an idempotent create, run as one unit of the writer: inside its transaction, under its write
   * lock, so they see one state of the file (an earlier unit of the same transaction included).
   */
  const createOnceStatements = (request: CreateOnceRequest): CreateOnceResult => {
    const values = insertOnceValues(request)
    const pet = insertOnce.get(...values)
    if (pet !== null) return created(pet)
    const holder = selectHolder.get(request.key, request.scope)
    if (holder !== null) {
      const { expiresAt, ...recorded } = holder
      if (isUnsettled(recorded.id)) return { _tag: "InUse" }
      if (isLive(expiresAt, request.now)) return { _tag: "Recorded", pet: recorded }
      releaseHolder.run(recorded.id)
    }
    const again = insertOnce.get(...values)
    return again === null ? { _tag: "InUse" } : created(again)
  }
  return {
    createOnce: (request) => observe(createOnceSql, writer.write(() => createOnceStatements(request))),
    create: (pet) => observe(insertSql, writer.write(() => insert.get(pet.name, pet.categoryId, pet.status)!)),
    // The place moves once the step's transaction has committed: a step rolled back is walked again.
    releaseExpired: (now, batch) =>
      Effect.map(writer.write(() => pruneStep(now, batch)), ({ next, ...step }) => {
        pruned = next
        return step
      }),
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

    // The idempotent create's statements with PostgreSQL's placeholders, numbered once.
    const insertOnceText = numbered(INSERT_ONCE)
    const selectHolderText = numbered(SELECT_HOLDER)
    const releaseHolderText = numbered(RELEASE_HOLDER)
    const releaseExpiredText = `${numbered(RELEASE_EXPIRED)} RETURNING id`
    const decodePet = Schema.decodeUnknown(PetRow)
    const decodeHolder = Schema.decodeUnknown(Schema.Struct({ ...PetRow.fields, expiresAt: BigIntColumn }))
    const insertOnce = (request: CreateOnceRequest) =>
      Effect.flatMap(
        sql.unsafe(insertOnceText, insertOnceValues(request)),
        (rows) => rows.length === 0 ? Effect.succeedNone : Effect.asSome(decodePet(rows[0]))
      )

    const createOnce = (request: CreateOnceRequest) =>
      Effect.gen(function*() {
        if (!(yield* tryLock(request))) return { _tag: "InUse" } as const
        const created = yield* insertOnce(request)
        if (Option.isSome(created)) return { _tag: "Created", pet: created.value } as const
        // The holder may be gone by now: the pruner, on another connection, forgot it after the insert met it.
        const rows = yield* sql.unsafe(selectHolderText, [request.key, request.scope])
        if (rows.length > 0) {
          const { expiresAt, ...holder } = yield* decodeHolder(rows[0])
          if (isLive(expiresAt, request.now)) return { _tag: "Recorded", pet: holder } as const
          yield* sql.unsafe(releaseHolderText, [holder.id])
        }
        const again = yield* insertOnce(request)
        return Option.isSome(again) ? { _tag: "Created", pet: again.value } as const : { _tag: "InUse" } as const
      }).pipe(
        sql.withTransaction,
        Effect.catchTag("ParseError", Effect.die),
        (effect) => observe(portableInsert, effect)
      ) satisfies Effect.Effect<CreateOnceResult, SqlError.SqlError>

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

    const releaseExpired = (now: number, batch: number) =>
      Effect.map(
        sql.unsafe(releaseExpiredText, [now, batch]),
        (rows): PruneStep => ({ released: rows.length, more: rows.length === batch })
      )

    return { create, createOnce, releaseExpired, findById, list } satisfies PetsRepository as PetsRepository
  })
}) {}
