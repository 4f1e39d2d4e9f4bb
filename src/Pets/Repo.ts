/**
 * The catalogue's storage: standard SQL (`INSERT … RETURNING`, keyset pages on the primary key), the same statements
 * on both backends (`Statements.ts` runs them) but for pruning expired idempotency records: SQLite walks the ids,
 * PostgreSQL uses its index on the expiry (migration 0006). A list also answers where the change feed ends
 * (`Feed.ts`), read in the same snapshot; a create wakes the feed's followers.
 */
import type { SqlError } from "@effect/sql"
import { Effect, Option, Ref, Schema } from "effect"
import type { PruneStep } from "../Database/Pruning.js"
import { statement, Statements } from "../Database/Statements.js"
import { type NewPet, Pet, PetId, type PetStatus } from "../Domain/Pet.js"
import { type FeedEnd, feedEndOf, type FeedRow, feedStatementsOn, PetsFeed } from "./Feed.js"

export interface ListOptions {
  /** Only the pet with this id (a page of at most one). */
  readonly id?: PetId | undefined
  readonly limit: number
  readonly status?: PetStatus | undefined
  readonly after?: PetId | undefined
}

export interface Page {
  readonly pets: ReadonlyArray<Pet>
  /** Whether more pets follow the last one of this page. */
  readonly more: boolean
  /** The end of the change feed in the snapshot the page was read in. */
  readonly feed: FeedEnd
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
  /** Another transaction holds the key (another request, on any replica), or held it when this one looked. */
  | { readonly _tag: "InUse" }

const COLUMNS = `id, name, category_id AS "categoryId", status`
const INSERT = statement<Pet, [name: string, categoryId: number, status: PetStatus]>(
  `INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING ${COLUMNS}`,
  Pet
)
const FIND_ONE = statement<Pet, [PetId]>(`SELECT ${COLUMNS} FROM pets WHERE id = ?`, Pet)
const PAGE = statement<Pet, [after: number, limit: number]>(
  `SELECT ${COLUMNS} FROM pets WHERE id > ? ORDER BY id LIMIT ?`,
  Pet
)
const PAGE_BY_STATUS = statement<Pet, [status: PetStatus, after: number, limit: number]>(
  `SELECT ${COLUMNS} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`,
  Pet
)
/** A pet and its record; nothing when a record (live or expired) already holds the key. */
const INSERT_ONCE = statement<
  Pet,
  [name: string, categoryId: number, status: PetStatus, key: string, scope: string, expiresAt: number]
>(
  `INSERT INTO pets (name, category_id, status, idempotency_key, idempotency_scope, idempotency_expires_at)
  VALUES (?, ?, ?, ?, ?, ?)
  ON CONFLICT (idempotency_key, idempotency_scope) WHERE idempotency_key IS NOT NULL DO NOTHING
  RETURNING ${COLUMNS}`,
  Pet
)
/** The pet whose record holds a key. */
const Holder = Schema.Struct({ ...Pet.fields, expiresAt: Schema.Number })
const SELECT_HOLDER = statement<typeof Holder.Type, [key: string, scope: string]>(
  `SELECT ${COLUMNS}, idempotency_expires_at AS "expiresAt" FROM pets WHERE idempotency_key = ? AND idempotency_scope = ?`,
  Holder
)
/** Forgets a pet's record: an expired one that holds a key being used again, and the pruner's. */
const RELEASE = `UPDATE pets SET idempotency_key = NULL, idempotency_scope = NULL, idempotency_expires_at = NULL`
const RELEASE_HOLDER = statement<never, [PetId]>(`${RELEASE} WHERE id = ?`)
/** PostgreSQL: a batch of expired records (the partial index on the expiry finds them). */
const Id = Schema.Struct({ id: PetId })
/** An aggregate's id: none without rows. */
const IdOrNull = Schema.Struct({ id: Schema.NullOr(PetId) })
const RELEASE_EXPIRED = statement<typeof Id.Type, [now: number, batch: number]>(
  `${RELEASE} WHERE id IN (SELECT id FROM pets WHERE idempotency_key IS NOT NULL AND idempotency_expires_at <= ? LIMIT ?)
  RETURNING id`,
  Id
)
/** SQLite: the expired records among a range of ids, the first record left in it (a live one), the last pet. */
const RELEASE_EXPIRED_BETWEEN = statement<typeof Id.Type, [from: number, to: number, now: number]>(
  `${RELEASE} WHERE id > ? AND id <= ? AND idempotency_key IS NOT NULL AND idempotency_expires_at <= ? RETURNING id`,
  Id
)
const FIRST_RECORD_BETWEEN = statement<typeof IdOrNull.Type, [from: number, to: number]>(
  `SELECT min(id) AS id FROM pets WHERE id > ? AND id <= ? AND idempotency_key IS NOT NULL`,
  IdOrNull
)
const LAST_ID = statement<typeof IdOrNull.Type>(`SELECT max(id) AS id FROM pets`, IdOrNull)

const firstRow = <Row>(rows: Array<Row>) => Option.fromNullable(rows[0])
const inUse: CreateOnceResult = { _tag: "InUse" }

export class PetsRepo extends Effect.Service<PetsRepo>()("Pets/Repo", {
  dependencies: [Statements.Default, PetsFeed.Default],
  scoped: Effect.gen(function*() {
    const { query, queryBoth, system, transaction } = yield* Statements
    const feed = feedStatementsOn(system)
    const { announce } = yield* PetsFeed

    /** Adds a pet; the returned row is durably committed before this succeeds. */
    const create = (pet: NewPet): Effect.Effect<Pet, SqlError.SqlError> =>
      Effect.tap(query(INSERT, [pet.name, pet.categoryId, pet.status], (rows) => rows[0]), () => announce)

    /**
     * A create sent with an idempotency key: the pet is inserted with its key, scope and expiry in its own row (its
     * record), unless a live record holds the key — then that pet is the result. One transaction, which first takes
     * a lock on (scope, key) without waiting: a request that finds it taken is told `InUse`. A record expired but not
     * yet pruned is released and the pet inserted; so is a record the pruner forgot between the two (`InUse` if the
     * key is still taken then: another transaction took it meanwhile).
     */
    const createOnce = (request: CreateOnceRequest): Effect.Effect<CreateOnceResult, SqlError.SqlError> =>
      Effect.tap(createOnceIn(request), (result) => result._tag === "Created" ? announce : Effect.void)
    const createOnceIn = (request: CreateOnceRequest) =>
      transaction((tx) =>
        Effect.gen(function*() {
          if (!(yield* tx.tryLock(`${request.scope} ${request.key}`))) return inUse
          const { categoryId, name, status } = request.pet
          const values = [name, categoryId, status, request.key, request.scope, request.expiresAt] as const
          const [pet] = yield* tx.query(INSERT_ONCE, values)
          if (pet !== undefined) return { _tag: "Created", pet } as const
          const [holder] = yield* tx.query(SELECT_HOLDER, [request.key, request.scope])
          if (holder !== undefined) {
            const { expiresAt, ...recorded } = holder
            if (expiresAt > request.now) return { _tag: "Recorded", pet: recorded } as const
            yield* tx.query(RELEASE_HOLDER, [recorded.id])
          }
          const [again] = yield* tx.query(INSERT_ONCE, values)
          return again === undefined ? inUse : { _tag: "Created", pet: again } as const
        })
      )

    /**
     * The SQLite pruner's place: no pet at or below this id holds an expired record (as of its last step). It starts
     * at 0 in each process and stops before the first live record; a record written with a longer TTL (before a
     * restart with a shorter one) holds it up, and the records after it wait for its expiry — absent meanwhile.
     */
    const pruned = yield* Ref.make(0)
    const walk = (now: number, batch: number) =>
      Effect.gen(function*() {
        const from = yield* Ref.get(pruned)
        const end = from + batch
        const { next, ...step } = yield* transaction((tx) =>
          Effect.gen(function*() {
            const released = yield* tx.query(RELEASE_EXPIRED_BETWEEN, [from, end, now], (rows) => rows.length)
            const [{ id: live }] = yield* tx.query(FIRST_RECORD_BETWEEN, [from, end])
            if (live !== null) return { released, more: false, next: live - 1 }
            const [{ id: last }] = yield* tx.query(LAST_ID, [])
            return { released, more: end < (last ?? 0), next: Math.min(end, last ?? 0) }
          })
        )
        // The place moves once the step's transaction has committed: a step rolled back is walked again.
        yield* Ref.set(pruned, next)
        return step
      })

    /**
     * One step of pruning: forgets records expired by `now` (their pets stay), a batch at a time — on PostgreSQL up to
     * `batch` records (found by the index on the expiry); on SQLite those among the next `batch` pets in id order,
     * from where the last step stopped (records expire in id order there: migration 0006).
     */
    const releaseExpired = (now: number, batch: number): Effect.Effect<PruneStep, SqlError.SqlError> =>
      system === "postgresql"
        ? query(RELEASE_EXPIRED, [now, batch], (rows) => ({ released: rows.length, more: rows.length === batch }))
        : walk(now, batch)

    const findById = (id: PetId): Effect.Effect<Option.Option<Pet>, SqlError.SqlError> =>
      query(FIND_ONE, [id], firstRow)

    /**
     * One keyset page in id order, and the feed's end in the same snapshot; one extra row is read to tell whether
     * another page follows. With an id, the pet that has it if it passes the other filters too: a page of at most one
     * (a limit is at least 1), the last.
     */
    const list = ({ after = 0 as PetId, id, limit, status }: ListOptions): Effect.Effect<Page, SqlError.SqlError> => {
      const page = (pets: Array<Pet>, end: Array<FeedRow>): Page => {
        const more = pets.length > limit
        if (more) pets.length = limit
        return { pets, more, feed: feedEndOf(end) }
      }
      if (id !== undefined) {
        return queryBoth(FIND_ONE, [id], feed.END, [], (pets, end) => ({
          pets: pets.filter((pet) => pet.id > after && (status === undefined || pet.status === status)),
          more: false,
          feed: feedEndOf(end)
        }))
      }
      return status === undefined
        ? queryBoth(PAGE, [after, limit + 1], feed.END, [], page)
        : queryBoth(PAGE_BY_STATUS, [status, after, limit + 1], feed.END, [], page)
    }

    return { create, createOnce, releaseExpired, findById, list }
  })
}) {}
