/**
 * The change feed: the pets created, in the order their creates committed, from any position. A position is a pet's
 * place in that order: on SQLite its id (the one writer hands ids out in commit order), on PostgreSQL its `position`,
 * which a trigger takes from `feed_counter` in the inserting transaction (migration 0007: the counter's row stays
 * locked until that transaction ends, so positions commit in order and none commits below one already read).
 *
 * Each process reads every new change once, for all its followers (`publish`): while any follows, it reads when it
 * creates a pet, when PostgreSQL notifies a create made by another replica (migration 0008, `Notifications.ts`), and
 * every CHECK_EVERY in case a notification was missed. A follower joins between two reads and is handed every change
 * read after it joined, synchronously, as a read's changes come; what was committed before (from its own position up
 * to where the process's reads stood when it joined) it reads from the table itself (`changesAfter`). Nothing is
 * skipped and nothing comes twice. A follower that cannot take what it is handed (its client does not read), or that
 * throws, is dropped, and told so; the others are handed every change all the same. The long poll is `FeedPolls.ts`.
 */
import type { SqlError } from "@effect/sql"
import {
  Duration,
  Effect,
  Either,
  Option,
  type ParseResult,
  Queue,
  Schedule,
  type Scope,
  Stream,
  SubscriptionRef
} from "effect"
import * as Schema from "effect/Schema"
import { FEED_CHANNEL, Notifications } from "../Database/Notifications.js"
import { rowDecoder } from "../Database/Statement.js"
import { statement, Statements } from "../Database/Statements.js"
import { Pet, PetStatus } from "../Domain/Pet.js"

/** Where the change feed ends: the database's feed id and the last committed position (0: no pet yet). */
export interface FeedEnd {
  readonly database: string
  readonly end: number
}

/**
 * A pet at its position; or, for a row its schema refuses (written around the API), why, in place of the pet. Nothing
 * passes over a refused row but a follower that starts after it: it is never delivered, and no position moves past it.
 */
export type FeedChange =
  | { readonly position: number; readonly pet: Pet; readonly refused?: undefined; readonly status?: undefined }
  | {
    readonly position: number
    readonly pet?: undefined
    readonly refused: ParseResult.ParseError
    /** The row's status, when that much of it decodes. */
    readonly status: PetStatus | undefined
  }

/**
 * Whether a follower with this status filter passes over the change (the id alone moves its position): a pet of
 * another status, or a refused row whose status is another. A refused row it does not pass over stops it.
 */
export const passesOver = (change: FeedChange, status: PetStatus | undefined): boolean => {
  const of = change.pet?.status ?? change.status
  return status !== undefined && of !== undefined && of !== status
}

/** How many pets a feed read takes at a time. */
export const BATCH = 100
/** How often a process that has followers looks for changes without a wake-up (one missed, or none to come). */
const CHECK_EVERY = Duration.seconds(1)
/**
 * How long the wake-ups are listened for after the last follower left (followers that come and go keep one `LISTEN`):
 * longer than a connection of the pool is waited for (`DB_CONNECT_TIMEOUT`, 5 s unless set), so that a listen stops
 * only once its connection is reserved (one stopped while reserving loses it to the pool).
 */
export const LISTEN_LINGER = Duration.seconds(10)

/**
 * A follower of the feed: handed the changes read after it joined, in commit order, as they are read. `deliver` is
 * false when it cannot take them: it is then dropped, and `dropped` is called. One whose `deliver` throws is dropped
 * too, and `dropped` is given what it threw (logged): the others are handed the same changes all the same.
 */
export interface Follower {
  readonly deliver: (changes: ReadonlyArray<FeedChange>) => boolean
  readonly dropped: (defect?: unknown) => void
}

export const FeedRow = Schema.Struct({ database: Schema.String, end: Schema.Number })
export type FeedRow = typeof FeedRow.Type
/** A pet and its position in the feed: each row is decoded on its own, so that one refused row refuses no other. */
const Position = Schema.Struct({ position: Schema.Number })
const decodeChange = rowDecoder(Schema.Struct({ ...Position.fields, ...Pet.fields }))
const decodePosition = Schema.decodeUnknownSync(Position)
const decodeStatus = Schema.decodeUnknownOption(Schema.Struct({ status: PetStatus }))
const changesOf = (rows: ReadonlyArray<unknown>): Array<FeedChange> => {
  const changes: Array<FeedChange> = []
  for (const row of rows) {
    const decoded = decodeChange(row)
    if (Either.isLeft(decoded)) {
      const status = Option.getOrUndefined(Option.map(decodeStatus(row), (row) => row.status))
      changes.push({ position: decodePosition(row).position, refused: decoded.left, status })
      continue
    }
    const { position, ...pet } = decoded.right
    changes.push({ position, pet })
  }
  return changes
}
export const feedEndOf = (rows: ReadonlyArray<FeedRow>): FeedEnd => ({
  database: rows[0].database,
  end: Number(rows[0].end)
})

/**
 * The statements that name the feed's position: `id` on SQLite, `position` on PostgreSQL. The end is a look at the
 * last entry of the position's index, the feed id one row.
 */
const feedStatements = (position: "id" | "position") => ({
  END: statement<FeedRow>(
    `SELECT (SELECT id FROM feed_meta) AS "database", coalesce(max(${position}), 0) AS "end" FROM pets`,
    FeedRow
  ),
  CHANGES: statement<unknown, [after: number, limit: number]>(
    `SELECT ${position} AS "position", id, name, category_id AS "categoryId", status FROM pets WHERE ${position} > ? ` +
      `ORDER BY ${position} LIMIT ?`,
    Schema.Unknown
  )
})
const ON_SQLITE = feedStatements("id")
const ON_POSTGRESQL = feedStatements("position")

/** The feed's statements on a backend; `END` also answers the list's `Feed-Position` (`PetsRepo.list`). */
export const feedStatementsOn = (system: string) => system === "postgresql" ? ON_POSTGRESQL : ON_SQLITE

export class PetsFeed extends Effect.Service<PetsFeed>()("Pets/Feed", {
  dependencies: [Statements.Default],
  scoped: Effect.gen(function*() {
    const { query, system } = yield* Statements
    const { CHANGES, END } = feedStatementsOn(system)
    const readEnd = query(END, [], feedEndOf)
    /** The next changes after a position, BATCH at most, from the table. */
    const changesAfter = (after: number): Effect.Effect<ReadonlyArray<FeedChange>, SqlError.SqlError> =>
      query(CHANGES, [after, BATCH], changesOf)

    /**
     * The followers and where the process's reads stand (`published`: every change up to it has been handed to every
     * follower; undefined while nobody follows). Changed only with the lock held, which `publish` holds while it
     * reads, so that a follower joins between two reads, never during one.
     */
    const lock = yield* Effect.makeSemaphore(1)
    const followers = new Set<Follower>()
    let published: FeedEnd | undefined
    const following = yield* SubscriptionRef.make(0)

    /** Hands changes to every follower: one that cannot take them, or throws, is dropped (and told); none is skipped. */
    const deliver = (changes: ReadonlyArray<FeedChange>) =>
      Effect.suspend(() => {
        const failures: Array<unknown> = []
        const drop = (follower: Follower, ...defect: [] | [unknown]) => {
          followers.delete(follower)
          try {
            follower.dropped(...defect)
          } catch (thrown) {
            failures.push(thrown)
          }
        }
        for (const follower of followers) {
          try {
            if (!follower.deliver(changes)) drop(follower)
          } catch (defect) {
            failures.push(defect)
            drop(follower, defect)
          }
        }
        return Effect.forEach(failures, (defect) => Effect.logError("a follower of the change feed failed", defect))
      })

    /**
     * Reads the changes past `published` and hands them to every follower; `published` moves past them once they have
     * been handed to all.
     */
    const publish = lock.withPermits(1)(Effect.gen(function*() {
      while (published !== undefined) {
        const changes = yield* changesAfter(published.end)
        if (changes.length === 0) return
        yield* deliver(changes)
        published = { database: published.database, end: changes.at(-1)!.position }
        if (changes.length < BATCH) return
      }
    }))

    const wake = yield* Queue.sliding<void>(1)
    // While anyone follows: a read at each wake-up, and every CHECK_EVERY. Idle, it waits for a follower.
    yield* following.changes.pipe(Stream.filter((n) => n > 0), Stream.runHead).pipe(
      Effect.zipRight(Effect.race(Queue.take(wake), Effect.sleep(CHECK_EVERY))),
      // Whatever one read meets, the next wake-up reads again.
      Effect.zipRight(publish.pipe(
        Effect.catchAll((error) => Effect.logWarning("the change feed could not read the database", error)),
        Effect.catchAllDefect((defect) => Effect.logError("the change feed's read failed", defect))
      )),
      Effect.forever,
      Effect.forkScoped
    )
    // PostgreSQL's wake-ups, while anyone follows and LISTEN_LINGER after: listening holds a connection of the pool.
    const notifications = yield* Effect.serviceOption(Notifications)
    if (Option.isSome(notifications)) {
      const listen = notifications.value.listen(FEED_CHANNEL).pipe(
        Stream.tapError((error) => Effect.logDebug("the change feed's wake-ups stopped; listening again", error)),
        Stream.retry(Schedule.spaced(CHECK_EVERY))
      )
      // The last follower's leave counts once nobody has joined for LISTEN_LINGER.
      const active = (n: number) => n > 0 ? Effect.succeed(true) : Effect.as(Effect.sleep(LISTEN_LINGER), false)
      yield* following.changes.pipe(
        Stream.flatMap((n) => Stream.fromEffect(active(n)), { switch: true }),
        Stream.changes,
        Stream.flatMap((listening) => listening ? listen : Stream.empty, { switch: true }),
        Stream.runForEach(() => Queue.offer(wake, undefined)),
        Effect.forkScoped
      )
    }

    /** A create of this process: the followers' next read is now. */
    const announce: Effect.Effect<void> = Effect.asVoid(Queue.offer(wake, undefined))

    /**
     * Joins the followers until the scope closes: where the process's reads stood when it joined (when nobody
     * followed: `known`, an end the caller has just read, else read now). Every change after it is handed to the
     * follower; those up to it are the follower's to read.
     */
    const join = (follower: Follower, known?: FeedEnd): Effect.Effect<FeedEnd, SqlError.SqlError, Scope.Scope> =>
      Effect.acquireRelease(
        lock.withPermits(1)(Effect.gen(function*() {
          if (published === undefined) published = known ?? (yield* readEnd)
          followers.add(follower)
          yield* SubscriptionRef.set(following, followers.size)
          return published
        })),
        () =>
          lock.withPermits(1)(Effect.suspend(() => {
            followers.delete(follower)
            if (followers.size === 0) published = undefined
            return SubscriptionRef.set(following, followers.size)
          }))
      )

    /** Where the feed ends now. */
    const feedEnd: Effect.Effect<FeedEnd, SqlError.SqlError> = readEnd

    return { announce, feedEnd, changesAfter, join }
  })
}) {}
