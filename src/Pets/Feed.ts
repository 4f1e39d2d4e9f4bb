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
 * skipped and nothing comes twice. A follower that cannot take what it is handed (its client does not read) is
 * dropped, and told so.
 */
import type { SqlError } from "@effect/sql"
import { type Chunk, Duration, Effect, Option, Queue, Schedule, type Scope, Stream, SubscriptionRef } from "effect"
import { FEED_CHANNEL, Notifications } from "../Database/Notifications.js"
import { statement, Statements } from "../Database/Statements.js"
import type { Pet, PetStatus } from "../Domain/Pet.js"

/** Where the change feed ends: the database's feed id and the last committed position (0: no pet yet). */
export interface FeedEnd {
  readonly database: string
  readonly end: number
}

export interface FeedChange {
  readonly position: number
  readonly pet: Pet
}

/** Pets created after a position, in commit order. */
interface FeedPage {
  readonly changes: ReadonlyArray<FeedChange>
  /** Past every pet read, matching the filter or not. */
  readonly next: number
}

/** How many pets a feed read takes at a time; a filtered long poll scans at most SCAN_MAX per request. */
export const BATCH = 100
const SCAN_MAX = 1_000
/** How many changes a long poll may have waiting (it takes them as they come). */
const POLL_QUEUE = 1_000
/** How often a process that has followers looks for changes without a wake-up (one missed, or none to come). */
const CHECK_EVERY = Duration.seconds(1)

/**
 * A follower of the feed: handed the changes read after it joined, in commit order, as they are read. `deliver` is
 * false when it cannot take them: it is then dropped, and `dropped` is called.
 */
export interface Follower {
  readonly deliver: (changes: ReadonlyArray<FeedChange>) => boolean
  readonly dropped: () => void
}

export interface FeedRow {
  readonly database: string
  readonly end: number
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
    `SELECT (SELECT id FROM feed_meta) AS "database", coalesce(max(${position}), 0) AS "end" FROM pets`
  ),
  CHANGES: statement<Pet & { readonly position: number }, [after: number, limit: number]>(
    `SELECT ${position} AS "position", id, name, category_id AS "categoryId", status FROM pets WHERE ${position} > ? ` +
      `ORDER BY ${position} LIMIT ?`
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
      query(
        CHANGES,
        [after, BATCH],
        (rows) => rows.map(({ position, ...pet }): FeedChange => ({ position: Number(position), pet }))
      )

    /**
     * The followers and where the process's reads stand (`published`: every change up to it has been handed to every
     * follower; undefined while nobody follows). Changed only with the lock held, which `publish` holds while it
     * reads, so that a follower joins between two reads, never during one.
     */
    const lock = yield* Effect.makeSemaphore(1)
    const followers = new Set<Follower>()
    let published: FeedEnd | undefined
    const following = yield* SubscriptionRef.make(0)

    /** Reads the changes past `published` and hands them to every follower; one that cannot take them is dropped. */
    const publish = lock.withPermits(1)(Effect.gen(function*() {
      while (published !== undefined) {
        const changes = yield* changesAfter(published.end)
        if (changes.length === 0) return
        published = { database: published.database, end: changes.at(-1)!.position }
        yield* Effect.sync(() => {
          for (const follower of followers) {
            if (!follower.deliver(changes)) {
              followers.delete(follower)
              follower.dropped()
            }
          }
        })
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
    // PostgreSQL's wake-ups, while anyone follows: listening holds a connection of the pool.
    const notifications = yield* Effect.serviceOption(Notifications)
    if (Option.isSome(notifications)) {
      const listen = notifications.value.listen(FEED_CHANNEL).pipe(
        Stream.tapError((error) => Effect.logDebug("the change feed's wake-ups stopped; listening again", error)),
        Stream.retry(Schedule.spaced(CHECK_EVERY))
      )
      yield* following.changes.pipe(
        Stream.map((n) => n > 0),
        Stream.changes,
        Stream.flatMap((active) => active ? listen : Stream.empty, { switch: true }),
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

    /**
     * A long poll: the pets after `after` (a position at most the feed's end) with the status, up to `limit`, as soon
     * as one is there, or none once `millis` have passed; `next` advances past the pets that did not match meanwhile.
     * A filtered poll answers, empty, once it has passed SCAN_MAX pets that do not match. `end`: the feed's end as
     * the caller just read it.
     */
    const follow = (
      after: number,
      options: {
        readonly limit: number
        readonly status: PetStatus | undefined
        readonly millis: number
        readonly end: FeedEnd
      }
    ): Effect.Effect<FeedPage, SqlError.SqlError> =>
      Effect.scoped(Effect.gen(function*() {
        const queue = yield* Queue.dropping<FeedChange>(POLL_QUEUE)
        let fellBehind = false
        const from = yield* join({
          deliver: (changes) => changes.every((change) => queue.unsafeOffer(change)),
          dropped: () => fellBehind = true
        }, options.end)
        const changes: Array<FeedChange> = []
        let next = after
        let scanned = 0
        /** Takes what came at once; true while the poll goes on. */
        const take = (chunk: Iterable<FeedChange>) => {
          for (const change of chunk) {
            if (change.position <= next) continue
            next = change.position
            scanned++
            if (options.status === undefined || change.pet.status === options.status) {
              changes.push(change)
              if (changes.length === options.limit) return false
            }
          }
          return changes.length === 0 && scanned < SCAN_MAX
        }
        // What was committed before it joined, from the table; then what the process reads, as it comes.
        while (next < from.end) {
          const read = yield* changesAfter(next)
          if (!take(read) || read.length < BATCH) return { changes, next }
        }
        const deadline = Effect.sleep(Duration.millis(Math.max(0, options.millis)))
        const taken = Queue.takeBetween(queue, 1, POLL_QUEUE)
        while (!fellBehind) {
          const chunk: Option.Option<Chunk.Chunk<FeedChange>> = yield* Effect.raceFirst(
            Effect.map(taken, Option.some),
            Effect.as(deadline, Option.none())
          )
          if (Option.isNone(chunk) || !take(chunk.value)) break
        }
        return { changes, next }
      }))

    return { announce, feedEnd, changesAfter, join, follow }
  })
}) {}
