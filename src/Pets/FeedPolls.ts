/**
 * The change feed's long poll (`GET /v1/pets/changes` without `Accept: text/event-stream`): the pets after a position
 * with the status asked, up to a limit, answered as soon as one is there, or an empty page once `wait` seconds have
 * passed in all, whatever else is created meanwhile (`wait=0`: what the table holds, at once). A poll reads what was
 * committed before it joined the feed's followers from the table, then takes the process's reads (`Feed.ts`); `next`
 * moves past the pets the filter passes over (past SCAN_MAX of them, the page is answered empty, further on).
 *
 * While polls wait, one check reads each of their keys every RECHECK_EVERY, and a poll that waited reads its key
 * again before it answers (`isRevoked` sees what was committed before it is asked): a key revoked while its poll
 * waits, here or elsewhere, is answered 401 within half a second, and gets no pet created after its revocation. When
 * the listener stops accepting connections (the drain), every poll answers its page as it stands (empty, with `next`),
 * and one that comes later answers at once, so that the client polls on from another replica.
 *
 * `next` never moves past a pet the page does not hold. A pet the `Pet` schema refuses (a row written around the API)
 * ends the page before it; a page that would begin with it is a defect (a 500, logged with the refusal), sent again
 * until the row is mended: the poll never skips it.
 */
import { type Chunk, Deferred, Duration, Effect, Exit, Queue, Stream, SubscriptionRef } from "effect"
import { CurrentApiKey } from "../Auth/Api.js"
import { ApiKeys } from "../Auth/ApiKeys.js"
import { refuseInvalidKey } from "../Auth/Http.js"
import type { ApiKeyId } from "../Domain/ApiKey.js"
import { feedPositionGone } from "../Domain/Errors.js"
import { type ChangesQuery, formatPosition, resumeFrom, WAIT_DEFAULT } from "../Domain/Feed.js"
import { LIMIT_DEFAULT, Pet, type PetStatus } from "../Domain/Pet.js"
import { Lifecycle } from "../Operations/Lifecycle.js"
import { orUnavailable } from "../Unavailable.js"
import { BATCH, type FeedChange, type FeedEnd, passesOver, PetsFeed } from "./Feed.js"

/** A filtered poll scans at most SCAN_MAX pets per request. */
const SCAN_MAX = 1_000
/** How many changes a poll may have waiting (it takes them as they come). */
const POLL_QUEUE = 1_000
/**
 * How often the keys of the waiting polls are read (one read per key, however many polls wait on it): a revocation
 * ends the wait within this time and a read, well within half a second.
 */
const RECHECK_EVERY = Duration.millis(250)

interface PollOptions {
  readonly limit: number
  readonly status: PetStatus | undefined
  readonly millis: number
  /** The feed's end as the caller has just read it. */
  readonly end: FeedEnd
}

/**
 * A page in the making, from `after`: `take` adds the changes of a read and says whether the poll goes on; `page` is
 * what it answers.
 */
const pageFrom = (after: number, { limit, status }: PollOptions) => {
  const changes: Array<FeedChange & { readonly pet: Pet }> = []
  let next = after
  let scanned = 0
  let refused: { readonly position: number; readonly error: unknown } | undefined
  return {
    next: () => next,
    take: (chunk: Iterable<FeedChange>): boolean => {
      for (const change of chunk) {
        if (change.position <= next) continue
        if (!passesOver(change, status)) {
          if (change.refused !== undefined) {
            refused = { position: change.position, error: change.refused }
            return false
          }
          changes.push(change)
        }
        next = change.position
        scanned++
        if (changes.length === limit) return false
      }
      return changes.length === 0 && scanned < SCAN_MAX
    },
    page: (waited: boolean) =>
      refused !== undefined && changes.length === 0
        ? Effect.die(new Error(`the change feed's pet at position ${refused.position} is no Pet`, { cause: refused }))
        : Effect.succeed({ changes, next, waited })
  }
}

export class FeedPolls extends Effect.Service<FeedPolls>()("Pets/FeedPolls", {
  dependencies: [PetsFeed.Default],
  scoped: Effect.gen(function*() {
    const feed = yield* PetsFeed
    const keys = yield* ApiKeys
    const lifecycle = yield* Lifecycle

    /** The polls that wait, by key: the wake-up of each, called when its key is revoked (true) or the drain begins. */
    const waiting = new Map<ApiKeyId, Set<(revoked: boolean) => void>>()
    let draining = false
    const waitingCount = yield* SubscriptionRef.make(0)
    const wakeAll = (wakes: Iterable<(revoked: boolean) => void> | undefined, revoked: boolean) => {
      for (const wake of [...(wakes ?? [])]) wake(revoked)
    }
    // While any poll waits: each of their keys looked at once per RECHECK_EVERY.
    yield* waitingCount.changes.pipe(Stream.filter((n) => n > 0), Stream.runHead).pipe(
      Effect.zipRight(Effect.sleep(RECHECK_EVERY)),
      Effect.zipRight(
        Effect.suspend(() =>
          Effect.forEach([...waiting.keys()], (key) =>
            Effect.map(keys.isRevoked(key), (revoked) => {
              if (revoked) wakeAll(waiting.get(key), true)
            }), { concurrency: "unbounded", discard: true })
        )
      ),
      Effect.forever,
      Effect.forkScoped
    )
    yield* lifecycle.stoppedAccepting.pipe(
      Effect.zipRight(Effect.sync(() => {
        draining = true
        for (const wakes of waiting.values()) wakeAll(wakes, false)
      })),
      Effect.forkScoped
    )
    /** Until the scope closes: what ends the wait of a poll of `key` early (its key revoked, or the drain). */
    const woken = (key: ApiKeyId) =>
      Effect.acquireRelease(
        Effect.gen(function*() {
          const done = yield* Deferred.make<boolean>()
          const wake = (revoked: boolean) => Deferred.unsafeDone(done, Exit.succeed(revoked))
          if (draining) wake(false)
          const wakes = waiting.get(key) ?? new Set()
          waiting.set(key, wakes.add(wake))
          yield* SubscriptionRef.update(waitingCount, (n) => n + 1)
          return { wake, awaited: Deferred.await(done) }
        }),
        ({ wake }) =>
          Effect.suspend(() => {
            const wakes = waiting.get(key)!
            wakes.delete(wake)
            if (wakes.size === 0) waiting.delete(key)
            return SubscriptionRef.update(waitingCount, (n) => n - 1)
          })
      )

    /** The page after `after` (a position at most the feed's end) for a poll of `key`; `waited`: it joined the feed. */
    const follow = (key: ApiKeyId, after: number, options: PollOptions) =>
      Effect.scoped(Effect.gen(function*() {
        const page = pageFrom(after, options)
        /** Reads the table up to `until`; true once the page is done. */
        const fromTable = (until: number) =>
          Effect.gen(function*() {
            while (page.next() < until) {
              const read: ReadonlyArray<FeedChange> = yield* feed.changesAfter(page.next())
              if (!page.take(read) || read.length < BATCH) return true
            }
            return false
          })
        // Nothing to wait for (`wait=0`, or the drain): the table, at once, without joining the feed.
        if (options.millis <= 0 || draining) {
          yield* fromTable(Number.POSITIVE_INFINITY)
          return yield* page.page(false)
        }
        const queue = yield* Queue.dropping<FeedChange>(POLL_QUEUE)
        let fellBehind = false
        const from = yield* feed.join({
          deliver: (changes) => changes.every((change) => queue.unsafeOffer(change)),
          dropped: () => fellBehind = true
        }, options.end)
        // What was committed before it joined, from the table; then what the process reads, as it comes.
        if (yield* fromTable(from.end)) return yield* page.page(false)
        const { awaited } = yield* woken(key)
        const taking = Effect.gen(function*() {
          while (!fellBehind) {
            const chunk: Chunk.Chunk<FeedChange> = yield* Queue.takeBetween(queue, 1, POLL_QUEUE)
            if (!page.take(chunk)) return
          }
        })
        // One deadline for the whole wait, however many changes the filter passes over meanwhile.
        const deadline = Effect.as(Effect.sleep(Duration.millis(options.millis)), false)
        const revoked = yield* Effect.raceFirst(Effect.as(taking, false), Effect.raceFirst(deadline, awaited))
        return revoked ? undefined : yield* page.page(true)
      }))

    /** A long poll of the request's key; 410 for a position the feed cannot resume from. */
    const poll = (query: ChangesQuery) =>
      Effect.gen(function*() {
        const { id: key } = yield* CurrentApiKey
        const end = yield* orUnavailable(feed.feedEnd)
        const after = resumeFrom(query.after ?? "now", end)
        if (after === undefined) return yield* feedPositionGone()
        const page:
          | { changes: ReadonlyArray<FeedChange & { readonly pet: Pet }>; next: number; waited: boolean }
          | undefined = yield* orUnavailable(
            follow(key, after, {
              limit: query.limit ?? LIMIT_DEFAULT,
              status: query.status,
              millis: (query.wait ?? WAIT_DEFAULT) * 1_000,
              end
            })
          )
        // A poll whose key was found revoked, or that waited and whose key does not hold now, is refused.
        if (page === undefined || (page.waited && (yield* keys.isRevoked(key)))) return yield* refuseInvalidKey
        return {
          changes: page.changes.map(({ pet, position }) => ({ position: formatPosition(end.database, position), pet })),
          next: formatPosition(end.database, page.next)
        }
      })

    return { poll }
  })
}) {}
