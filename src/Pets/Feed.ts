/**
 * The change feed: the pets created, in the order their creates committed, from any position. A position is a pet's
 * place in that order: on SQLite its id (the one writer hands ids out in commit order), on PostgreSQL its `position`,
 * which a trigger takes from `feed_counter` in the inserting transaction (migration 0007: the counter's row stays
 * locked until that transaction ends, so positions commit in order and none commits below one already read).
 *
 * Each process reads every new change once, for all its followers (`publish`): while any follows, it reads when it
 * creates a pet, when PostgreSQL notifies a create made by another replica (migration 0008, `Notifications.ts`), and
 * every CHECK_EVERY in case a notification was missed. A follower that joins reads what it missed from the table, up
 * to where the process's reads stood when it joined, then takes the process's reads from its own queue: nothing is
 * skipped and nothing comes twice. The queue is bounded (QUEUE_CHANGES): a follower that falls that far behind ends
 * (`FellBehind`) and resumes from its last position, so a client that does not read costs a bounded amount of memory.
 */
import type { SqlError } from "@effect/sql"
import {
  Chunk,
  Config,
  Deferred,
  Duration,
  Effect,
  Either,
  Exit,
  Option,
  Queue,
  Schedule,
  Scope,
  Stream,
  SubscriptionRef
} from "effect"
import { variable } from "../Config.js"
import { FEED_CHANNEL, Notifications } from "../Database/Notifications.js"
import { statement, Statements } from "../Database/Statements.js"
import { type TooManyStreams, tooManyStreams, type Unavailable, unavailable } from "../Domain/Errors.js"
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
export interface FeedPage {
  readonly changes: ReadonlyArray<FeedChange>
  /** Past every pet read, matching the filter or not. */
  readonly next: number
}

/** A follower fell more than QUEUE_CHANGES behind the process's reads: it resumes from its last position. */
export class FellBehind {
  readonly _tag = "FellBehind"
}

/** How many changes a follower may have waiting before it is ended as `FellBehind`. */
export const QUEUE_CHANGES = 1_000
/** How many pets a feed read takes at a time; a filtered long poll scans at most SCAN_MAX per request. */
const BATCH = 100
const SCAN_MAX = 1_000
/** How often a process that has followers looks for changes without a wake-up (one missed, or none to come). */
const CHECK_EVERY = Duration.seconds(1)

const positiveInt = (name: string) =>
  variable(name, (text) => {
    const n = Number(text)
    return /^[0-9]+$/.test(text) && Number.isSafeInteger(n) && n > 0
      ? Either.right(n)
      : Either.left(`${name} must be a positive whole number (got ${JSON.stringify(text)})`)
  })

/** `FEED_STREAMS_PER_KEY` and `FEED_STREAMS`: the open event streams one API key, and one process, may have. */
export const FeedLimitsConfig = Config.all({
  perKey: positiveInt("FEED_STREAMS_PER_KEY").pipe(Config.withDefault(10)),
  perProcess: positiveInt("FEED_STREAMS").pipe(Config.withDefault(10_000))
})

/** How long a refused stream is told to wait before it tries again (`Retry-After`). */
export const STREAMS_RETRY_AFTER_SECONDS = 5

export interface FeedRow {
  readonly database: string
  readonly end: number
}
const feedEndOf = (rows: ReadonlyArray<FeedRow>): FeedEnd => ({
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
export { feedEndOf }

interface Follower {
  readonly queue: Queue.Queue<FeedChange>
  /** Done when the queue overflowed: the follower has been dropped and must end. */
  readonly behind: Deferred.Deferred<void>
  /** The API key of an event stream (counted against the limits); none for a long poll. */
  readonly key: string | undefined
}

export class PetsFeed extends Effect.Service<PetsFeed>()("Pets/Feed", {
  dependencies: [Statements.Default],
  scoped: Effect.gen(function*() {
    const { query } = yield* Statements
    const { CHANGES, END } = feedStatementsOn((yield* Statements).system)
    const limits = yield* FeedLimitsConfig
    const readEnd = query(END, [], feedEndOf)
    const readAfter = (after: number) =>
      query(
        CHANGES,
        [after, BATCH],
        (rows) => rows.map(({ position, ...pet }): FeedChange => ({ position: Number(position), pet }))
      )

    /**
     * The followers and where the process's reads stand (`published`: every change up to it has been offered to
     * every follower; undefined while nobody follows). Changed only with the lock held, which `publish` holds while
     * it reads, so that a follower joins between two reads, never during one.
     */
    const lock = yield* Effect.makeSemaphore(1)
    const followers = new Set<Follower>()
    const streamsByKey = new Map<string, number>()
    let published: FeedEnd | undefined
    const following = yield* SubscriptionRef.make(0)

    /** Reads the changes past `published` and offers them to every follower; one that cannot take them is dropped. */
    const publish = lock.withPermits(1)(Effect.gen(function*() {
      while (published !== undefined) {
        const changes = yield* readAfter(published.end)
        if (changes.length === 0) return
        published = { database: published.database, end: changes.at(-1)!.position }
        for (const follower of followers) {
          if (!(yield* Queue.offerAll(follower.queue, changes))) {
            followers.delete(follower)
            yield* Deferred.succeed(follower.behind, undefined)
          }
        }
        if (changes.length < BATCH) return
      }
    }))

    const wake = yield* Queue.sliding<void>(1)
    // While anyone follows: a read at each wake-up, and every CHECK_EVERY. Idle, it waits for a follower.
    yield* following.changes.pipe(Stream.filter((n) => n > 0), Stream.runHead).pipe(
      Effect.zipRight(Effect.race(Queue.take(wake), Effect.sleep(CHECK_EVERY))),
      Effect.zipRight(publish.pipe(
        Effect.catchAll((error) => Effect.logWarning("the change feed could not read the database", error))
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

    /** The limits a new event stream of `key` is held to: what it is refused with, if it is. */
    const refusal = (key: string): TooManyStreams | Unavailable | undefined => {
      let streams = 0
      for (const n of streamsByKey.values()) streams += n
      if ((streamsByKey.get(key) ?? 0) >= limits.perKey) return tooManyStreams(limits.perKey)
      if (streams >= limits.perProcess) {
        return unavailable(
          "This server has as many change streams open as it serves (FEED_STREAMS); try again " +
            "shortly, or another replica."
        )
      }
      return undefined
    }

    /** Joins the followers, from where the process's reads stand (read now when nobody followed); leaves on close. */
    const join = (key: string | undefined) =>
      Effect.acquireRelease(
        lock.withPermits(1)(Effect.gen(function*() {
          const refused = key === undefined ? undefined : refusal(key)
          if (refused !== undefined) return yield* Effect.fail(refused)
          published ??= yield* readEnd
          const follower: Follower = {
            queue: yield* Queue.dropping<FeedChange>(QUEUE_CHANGES),
            behind: yield* Deferred.make<void>(),
            key
          }
          followers.add(follower)
          if (key !== undefined) streamsByKey.set(key, (streamsByKey.get(key) ?? 0) + 1)
          yield* SubscriptionRef.set(following, followers.size)
          return { follower, from: published }
        })),
        ({ follower }) =>
          lock.withPermits(1)(Effect.gen(function*() {
            followers.delete(follower)
            if (follower.key !== undefined) {
              const left = streamsByKey.get(follower.key)! - 1
              if (left === 0) streamsByKey.delete(follower.key)
              else streamsByKey.set(follower.key, left)
            }
            if (followers.size === 0) published = undefined
            yield* SubscriptionRef.set(following, followers.size)
            yield* Queue.shutdown(follower.queue)
          }))
      )

    /** Where the feed ends now. */
    const feedEnd: Effect.Effect<FeedEnd, SqlError.SqlError> = readEnd

    /**
     * Every change after `after` (a position at most the feed's end), in commit order, as long as it is read: those
     * committed before the follower joined from the table, then each as the process reads it. It fails with
     * `FellBehind` when its reader does not keep up.
     */
    const changesFrom = (
      { follower, from }: Effect.Effect.Success<ReturnType<typeof join>>,
      after: number
    ): Stream.Stream<FeedChange, SqlError.SqlError | FellBehind> => {
      let last = after
      const missed = Stream.paginateChunkEffect(after, (position) =>
        Effect.map(readAfter(position), (changes) => {
          const end = changes.at(-1)?.position ?? position
          return [
            Chunk.unsafeFromArray(changes),
            end < from.end && changes.length === BATCH ? Option.some(end) : Option.none()
          ]
        }))
      return Stream.concat(missed, Stream.fromQueue(follower.queue)).pipe(
        // Chunk by chunk, so that a long poll sees what came at once as one.
        Stream.mapChunks((chunk) => {
          const fresh = Chunk.filter(chunk, (change) => change.position > last)
          if (Chunk.isNonEmpty(fresh)) last = Chunk.lastNonEmpty(fresh).position
          return fresh
        }),
        Stream.interruptWhen(Effect.zipRight(Deferred.await(follower.behind), Effect.fail(new FellBehind())))
      )
    }

    /**
     * An event stream of `key`'s: the changes after `after`, once it is admitted (`TooManyStreams` past
     * FEED_STREAMS_PER_KEY of the key's, `Unavailable` past FEED_STREAMS in the process). It holds its place among
     * the limits from now until the stream ends, however it ends.
     */
    const open = (
      after: number,
      key: string
    ): Effect.Effect<
      Stream.Stream<FeedChange, SqlError.SqlError | FellBehind>,
      SqlError.SqlError | TooManyStreams | Unavailable
    > =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          const joined = yield* restore(Scope.extend(join(key), scope)).pipe(
            Effect.onError((cause) => Scope.close(scope, Exit.failCause(cause)))
          )
          return changesFrom(joined, after).pipe(Stream.ensuring(Scope.close(scope, Exit.void)))
        })
      )

    /**
     * A long poll: the pets after `after` (a position at most the feed's end) with the status, up to `limit`, as soon
     * as one is there, or none once `millis` have passed; `next` advances past the pets that did not match meanwhile.
     * A filtered poll answers, empty, once it has passed SCAN_MAX pets that do not match.
     */
    const follow = (
      after: number,
      options: { readonly limit: number; readonly status: PetStatus | undefined; readonly millis: number }
    ): Effect.Effect<FeedPage, SqlError.SqlError | TooManyStreams | Unavailable> =>
      Effect.suspend(() => {
        const changes: Array<FeedChange> = []
        let next = after
        let scanned = 0
        // A chunk is what was there at once (a read of the table, or what the queue held): the poll answers after the
        // first chunk with a match in it.
        const take = (chunk: Chunk.Chunk<FeedChange>) =>
          Effect.sync(() => {
            for (const change of chunk) {
              next = change.position
              scanned++
              if (options.status === undefined || change.pet.status === options.status) {
                changes.push(change)
                if (changes.length === options.limit) return false
              }
            }
            return changes.length === 0 && scanned < SCAN_MAX
          })
        return Stream.unwrapScoped(Effect.map(join(undefined), (joined) => changesFrom(joined, after))).pipe(
          Stream.interruptWhen(Effect.sleep(Duration.millis(Math.max(0, options.millis)))),
          Stream.chunks,
          Stream.runForEachWhile(take),
          // Fallen behind while it read: it answers what it has, and the next poll goes on from there.
          Effect.catchIf((error) => error instanceof FellBehind, () => Effect.void),
          Effect.map((): FeedPage => ({ changes, next }))
        )
      })

    return { announce, feedEnd, open, follow }
  })
}) {}
