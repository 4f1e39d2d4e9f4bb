/**
 * The change feed as Server-Sent Events (`GET /v1/pets/changes` with `Accept: text/event-stream`): a `retry:` hint,
 * then an event `created` per pet (`id:` its position, `data:` the pet as the API answers it), and an id-only event
 * for a pet the status filter passes over (the client's `Last-Event-ID` moves past it). A stream is not a request that
 * takes too long: `REQUEST_TIMEOUT` bounds only its start.
 *
 * The streams of the process are one follower of the feed (`Feed.ts`) while any is open: each change it is handed is
 * encoded once and written to each stream's body (`ServerSentEvents.Sink`). A stream that opens reads what it missed
 * from the table, up to where the streams' follower stood when it opened, then takes the changes as they come. The
 * streams share one heartbeat (a comment every HEARTBEAT, so that neither the listener, whose idle timeout is past 30
 * seconds, nor a proxy with an idle timeout of 10 seconds or more takes a stream for idle) and one check of their keys
 * (every RECHECK_AFTER). An open stream is a few objects: its state here and its body.
 *
 * A stream ends with an event that says why, where it can still be written: `reset` for a position the feed cannot
 * resume from (the 410's body: a browser sees no status once it is connected), `error` with `slow_consumer` when the
 * client has not read BEHIND_BLOCKS of the blocks written, `unauthorized` when its key is revoked, `unavailable` when
 * the database fails. It ends without one when the server stops accepting connections (the drain), so that the
 * client reconnects to another replica.
 */
import type { SqlError } from "@effect/sql"
import { Config, Duration, Effect, ExecutionStrategy, Exit, Runtime, Scope, Stream, SubscriptionRef } from "effect"
import { CurrentApiKey } from "../Auth/Api.js"
import { ApiKeys, RECHECK_AFTER } from "../Auth/ApiKeys.js"
import { positiveInteger } from "../Config.js"
import type { ApiKeyId } from "../Domain/ApiKey.js"
import { type TooManyStreams, tooManyStreams, type Unavailable, unavailable } from "../Domain/Errors.js"
import { resumeFrom } from "../Domain/Feed.js"
import type { PetStatus } from "../Domain/Pet.js"
import { Lifecycle } from "../Operations/Lifecycle.js"
import { addResponseHeaders } from "../ResponseHeaders.js"
import * as ServerSentEvents from "../ServerSentEvents.js"
import { orUnavailable } from "../Unavailable.js"
import { type FeedChange, type FeedEnd, PetsFeed } from "./Feed.js"
import {
  BEHIND_BLOCKS,
  DATABASE_FAILED,
  HEARTBEAT_COMMENT,
  makeBlockOf,
  RESET,
  RETRY,
  RETRY_BLOCK,
  REVOKED,
  SLOW_CONSUMER
} from "./FeedBlocks.js"

/** How often every stream writes a comment. */
const HEARTBEAT = Duration.seconds(5)
/** How many changes may come for a stream while it still reads what it missed; past them it is ended. */
const WAITING_MAX = 10_000
/** How long a refused stream is told to wait before it tries again (`Retry-After`). */
const STREAMS_RETRY_AFTER_SECONDS = 5

/** `FEED_STREAMS_PER_KEY` and `FEED_STREAMS`: the open event streams one API key, and one process, may have. */
export const FeedLimitsConfig = Config.all({
  perKey: positiveInteger("FEED_STREAMS_PER_KEY", "the event streams one API key may hold open, such as 10").pipe(
    Config.withDefault(10)
  ),
  perProcess: positiveInteger("FEED_STREAMS", "the event streams this process serves at once, such as 10000").pipe(
    Config.withDefault(10_000)
  )
})

/** An open stream. */
interface Open {
  /** Its body, made once this state is, which the body's end hands back to `closed`. */
  sink: ServerSentEvents.Sink
  readonly key: ApiKeyId
  readonly status: PetStatus | undefined
  /** The last position written (or passed over). */
  last: number
  /** Changes handed over while it still reads what it missed from the table; undefined once it has. */
  waiting: Array<FeedChange> | undefined
  closed: boolean
}

export class FeedEvents extends Effect.Service<FeedEvents>()("Pets/FeedEvents", {
  dependencies: [PetsFeed.Default],
  scoped: Effect.gen(function*() {
    const feed = yield* PetsFeed
    const keys = yield* ApiKeys
    const lifecycle = yield* Lifecycle
    const scope = yield* Effect.scope
    // What runs when a stream ends, from its body's callback.
    const runtime = yield* Effect.runtime<never>()
    const limits = yield* FeedLimitsConfig
    const opens = new Set<Open>()
    const byKey = new Map<ApiKeyId, number>()
    /** The feed's database id, for the positions written (every stream of a process follows the same database). */
    let database = ""
    const blockOf = makeBlockOf()

    /** Writes the changes past the stream's last position; a client too far behind is ended. */
    const write = (open: Open, changes: Iterable<FeedChange>) => {
      for (const change of changes) {
        if (change.position <= open.last) continue
        open.last = change.position
        if (!open.sink.write(blockOf(database, change, open.status))) return open.sink.end(SLOW_CONSUMER)
      }
    }

    /**
     * The streams' one follower of the feed, while any stream is open (its scope), and the last position it was
     * handed: a stream that opens now has what follows it written as it comes.
     */
    const lock = yield* Effect.makeSemaphore(1)
    let following: { readonly scope: Scope.CloseableScope; handed: number } | undefined
    const follower = {
      deliver: (changes: ReadonlyArray<FeedChange>) => {
        if (following !== undefined) following.handed = changes.at(-1)!.position
        for (const open of opens) {
          if (open.waiting === undefined) write(open, changes)
          else if (open.waiting.push(...changes) > WAITING_MAX) open.sink.end(SLOW_CONSUMER)
        }
        return true
      },
      dropped: () => {}
    }
    const follow = (known: FeedEnd | undefined) =>
      Effect.gen(function*() {
        if (following !== undefined) return following.handed
        const followed = yield* Scope.fork(scope, ExecutionStrategy.sequential)
        const from = yield* Scope.extend(feed.join(follower, known), followed).pipe(
          Effect.onError(() => Scope.close(followed, Exit.void))
        )
        database = from.database
        following = { scope: followed, handed: from.end }
        return from.end
      })
    const unfollowWhenNoneOpen = lock.withPermits(1)(Effect.suspend(() => {
      if (opens.size > 0 || following === undefined) return Effect.void
      const { scope: followed } = following
      following = undefined
      return Scope.close(followed, Exit.void)
    }))

    /** How many streams are open: the timers below run only while some are. */
    const openCount = yield* SubscriptionRef.make(0)
    const whileOpen = (every: Duration.Duration, step: Effect.Effect<void>) =>
      openCount.changes.pipe(Stream.filter((n) => n > 0), Stream.runHead).pipe(
        Effect.zipRight(Effect.sleep(every)),
        Effect.zipRight(step),
        Effect.forever,
        Effect.forkScoped
      )
    // Every stream's heartbeat, one timer for all.
    yield* whileOpen(
      HEARTBEAT,
      Effect.sync(() => {
        for (const open of opens) if (!open.sink.write(HEARTBEAT_COMMENT)) open.sink.end(SLOW_CONSUMER)
      })
    )
    // The keys of the open streams, each looked at once per RECHECK_AFTER: a revoked key's streams end.
    yield* whileOpen(
      RECHECK_AFTER,
      Effect.suspend(() =>
        Effect.forEach([...byKey.keys()], (key) =>
          Effect.flatMap(keys.isRevoked(key), (revoked) =>
            Effect.sync(() => {
              if (revoked) { for (const open of opens) if (open.key === key) open.sink.end(REVOKED) }
            })), { concurrency: "unbounded", discard: true })
      )
    )
    // The drain: every stream ends once the listener stops accepting connections.
    yield* lifecycle.stoppedAccepting.pipe(
      Effect.zipRight(Effect.sync(() => {
        for (const open of opens) open.sink.end()
      })),
      Effect.forkScoped
    )

    /** Why a new stream of `key` is refused, if the limits refuse it. */
    const refusal = (key: ApiKeyId): TooManyStreams | Unavailable | undefined => {
      if ((byKey.get(key) ?? 0) >= limits.perKey) return tooManyStreams(limits.perKey)
      if (opens.size >= limits.perProcess) {
        return unavailable(
          "This server has as many change streams open as it serves (FEED_STREAMS); try again shortly, or another " +
            "replica."
        )
      }
      return undefined
    }
    /** A stream that ended: its place among the limits is free, and with the last one the streams stop following. */
    const closed = (open: Open) => {
      open.closed = true
      opens.delete(open)
      const left = byKey.get(open.key)! - 1
      if (left === 0) byKey.delete(open.key)
      else byKey.set(open.key, left)
      Runtime.runFork(runtime)(Effect.zipRight(SubscriptionRef.set(openCount, opens.size), unfollowWhenNoneOpen))
    }

    /** Writes what the stream missed, from the table up to `from`, then what came meanwhile and what comes. */
    const catchUp = (open: Open, from: number) =>
      Effect.gen(function*() {
        while (open.last < from && !open.closed) {
          const changes = yield* feed.changesAfter(open.last)
          if (changes.length === 0) break
          write(open, changes)
          yield* open.sink.drained
        }
        yield* Effect.sync(() => {
          const waiting = open.waiting!
          open.waiting = undefined
          write(open, waiting)
        })
      }).pipe(
        Effect.catchAll((error: SqlError.SqlError) =>
          Effect.zipRight(
            Effect.logError("the change feed's stream could not read the database", error).pipe(
              Effect.annotateLogs("keyId", open.key)
            ),
            Effect.sync(() => open.sink.end(DATABASE_FAILED))
          )
        )
      )

    /**
     * The event stream after `after` (a position, `start`, or `now`: where the process's reads of the feed stand), for
     * the request's key; refused before it starts past the limits (with `Retry-After`).
     */
    const stream = (after: string, status: PetStatus | undefined) =>
      Effect.gen(function*() {
        const { id: key } = yield* CurrentApiKey
        const opened = yield* lock.withPermits(1)(Effect.gen(function*() {
          // Where it resumes, against where the streams' reads stand (`now`); the feed's end is read only when the
          // streams follow nothing yet, or for a position past their reads.
          const read = following === undefined ? yield* feed.feedEnd : undefined
          let position = resumeFrom(after, read ?? { database, end: following!.handed })
          if (position === undefined && read === undefined) position = resumeFrom(after, yield* feed.feedEnd)
          if (position === undefined) return undefined
          const refused = refusal(key)
          if (refused !== undefined) return yield* Effect.fail(refused)
          const from = yield* follow(read)
          const open: Open = { sink: undefined!, key, status, last: position, waiting: [], closed: false }
          const { response, sink } = ServerSentEvents.makeSink(BEHIND_BLOCKS, closed, open)
          open.sink = sink
          opens.add(open)
          byKey.set(key, (byKey.get(key) ?? 0) + 1)
          yield* SubscriptionRef.set(openCount, opens.size)
          sink.write(RETRY_BLOCK)
          return { open, from, response }
        })).pipe(
          Effect.tapError((error) =>
            error._tag === "SqlError"
              ? Effect.void
              : addResponseHeaders({ "retry-after": String(STREAMS_RETRY_AFTER_SECONDS) })
          ),
          orUnavailable
        )
        if (opened === undefined) return ServerSentEvents.complete(RETRY, RESET)
        yield* Effect.forkIn(catchUp(opened.open, opened.from), scope)
        return opened.response
      })

    return { stream }
  })
}) {}
