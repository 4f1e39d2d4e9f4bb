/**
 * The change feed as Server-Sent Events (`GET /v1/pets/changes` with `Accept: text/event-stream`): a `retry:` hint,
 * then an event `created` per pet (`id:` its position, `data:` the pet as the API answers it), and an id-only event
 * for a pet the status filter passes over (the client's `Last-Event-ID` moves past it). A stream is not a request that
 * takes too long: `REQUEST_TIMEOUT` bounds only its start.
 *
 * The streams are one follower of the feed (`Feed.ts`) while any is open: each change is encoded once and written to
 * each body (`ServerSentEvents.Sink`) that stands where the follower does. A stream behind it (opened further back, or
 * whose client reads slower than changes come) reads from the table itself, a read each time its body has room for
 * one, until it stands there again: a client gets every pet as fast as it reads, and a body never holds more than
 * BEHIND_BLOCKS blocks and one read. One heartbeat for all (a comment every HEARTBEAT, shorter than the listener's and
 * proxies' idle timeouts) and one check of their keys (every RECHECK_AFTER). A stream is a few objects; a fiber only
 * while it reads from the table.
 *
 * A stream ends with an event that says why: `reset` for a position the feed cannot resume from (the 410's body),
 * `error` with `slow_consumer` when its body is full and its client has read nothing between two heartbeats,
 * `unauthorized` (its key revoked), `unavailable` (the database), `internal_error` when its next event cannot be
 * written (logged; the other streams go on). The drain ends it at once without one, so that the client reconnects
 * elsewhere (what it has not read yet is dropped, so that a client that has stopped reading holds no body open); one
 * that opens after the drain ends at once.
 */
import type { SqlError } from "@effect/sql"
import { Cause, Duration, Effect, ExecutionStrategy, Exit, FiberSet, Scope, Stream, SubscriptionRef } from "effect"
import { CurrentApiKey } from "../Auth/Api.js"
import { ApiKeys, RECHECK_AFTER } from "../Auth/ApiKeys.js"
import type { ApiKeyId } from "../Domain/ApiKey.js"
import { resumeFrom } from "../Domain/Feed.js"
import type { PetStatus } from "../Domain/Pet.js"
import { Lifecycle } from "../Operations/Lifecycle.js"
import { addResponseHeaders } from "../ResponseHeaders.js"
import * as ServerSentEvents from "../ServerSentEvents.js"
import { orUnavailable } from "../Unavailable.js"
import { BATCH, type FeedChange, type FeedEnd, PetsFeed } from "./Feed.js"
import * as Blocks from "./FeedBlocks.js"
import { makeStreamPlaces, STREAMS_RETRY_AFTER_SECONDS } from "./FeedLimits.js"

/** How often every stream writes a comment. */
const HEARTBEAT = Duration.seconds(5)
/** An open stream. */
interface Open {
  /** Its body, made once this state is, which the body's end hands back to `closed`. */
  sink: ServerSentEvents.Sink
  readonly key: ApiKeyId
  readonly status: PetStatus | undefined
  /** The last position written (or passed over). */
  last: number
  /** The request it answers, as the listener holds it (`Lifecycle.lasting`). */
  readonly request: Request
  /** Whether it is written the follower's changes as they come; while not, it reads them from the table itself. */
  live: boolean
}

/** What `stream` answers a stream that opens once the server has stopped accepting connections: its end, at once. */
const STOPPED = Symbol("stopped")

export class FeedEvents extends Effect.Service<FeedEvents>()("Pets/FeedEvents", {
  dependencies: [PetsFeed.Default],
  scoped: Effect.gen(function*() {
    const feed = yield* PetsFeed
    const keys = yield* ApiKeys
    const lifecycle = yield* Lifecycle
    const scope = yield* Effect.scope
    // What the streams start (their reads from the table, what runs when one ends, a failure's log line), interrupted
    // when the service closes; `runFork` starts them from the callbacks of the feed and of the bodies.
    const fibers = yield* FiberSet.make()
    const runFork = yield* FiberSet.runtime(fibers)<never>()
    const places = yield* makeStreamPlaces
    const opens = new Set<Open>()
    /** The feed's database id, for the positions written (every stream of a process follows the same database). */
    let database = ""
    /** Whether the server has stopped accepting connections: no stream opens from then on. */
    let stopped = false
    const blockOf = Blocks.makeBlockOf()

    /**
     * Writes the changes past the stream's last position while its body has room; false when it had not room for them
     * all. A change whose event cannot be written ends the stream before it, and is logged.
     */
    const write = (open: Open, changes: ReadonlyArray<FeedChange>): boolean => {
      try {
        for (const change of changes) {
          if (change.position <= open.last) continue
          if (open.sink.room === 0) return false
          open.sink.write(blockOf(database, change, open.status))
          open.last = change.position
        }
      } catch (cause) {
        open.sink.end(Blocks.EVENT_FAILED)
        const logged = Effect.logError("the change feed's stream could not write an event", Cause.die(cause))
        runFork(Effect.annotateLogs(logged, { keyId: open.key, after: open.last }))
      }
      return true
    }

    // The streams' one follower of the feed while any is open (its scope), and the last position it was handed (a read
    // handed over before `join` returns counts too): a stream that stands there has what follows written as it comes.
    const lock = yield* Effect.makeSemaphore(1)
    let following: Scope.CloseableScope | undefined
    let handed = 0
    const follower = {
      deliver: (changes: ReadonlyArray<FeedChange>) => {
        handed = changes.at(-1)!.position
        for (const open of opens) {
          if (open.live && !write(open, changes)) {
            open.live = false
            runFork(catchUp(open))
          }
        }
        return true
      },
      dropped: () => {}
    }
    const follow = (known: FeedEnd | undefined) =>
      Effect.gen(function*() {
        if (following !== undefined) return handed
        const followed = yield* Scope.fork(scope, ExecutionStrategy.sequential)
        const from = yield* Scope.extend(feed.join(follower, known), followed).pipe(
          Effect.onError(() => Scope.close(followed, Exit.void))
        )
        database = from.database
        following = followed
        handed = Math.max(handed, from.end)
        return handed
      })
    const unfollowWhenNoneOpen = lock.withPermits(1)(Effect.suspend(() => {
      if (opens.size > 0 || following === undefined) return Effect.void
      const followed = following
      following = undefined
      handed = 0
      return Scope.close(followed, Exit.void)
    }))

    /**
     * A stream behind the follower reads what it misses from the table, a read each time its body has room for one,
     * until it stands where the follower does (the check and the switch in one step, between two of its deliveries).
     */
    const catchUp = (open: Open): Effect.Effect<void> =>
      Effect.gen(function*() {
        while (opens.has(open)) {
          yield* open.sink.roomFor(BATCH)
          if (!opens.has(open)) return
          const changes = yield* feed.changesAfter(open.last)
          open.live = write(open, changes) && open.last >= handed
          if (open.live) return
        }
      }).pipe(
        Effect.catchAll((error: SqlError.SqlError) =>
          Effect.zipRight(
            Effect.logError("the change feed's stream could not read the database", error).pipe(
              Effect.annotateLogs("keyId", open.key)
            ),
            Effect.sync(() => open.sink.end(Blocks.DATABASE_FAILED))
          )
        )
      )

    /** How many streams are open: the timers below run only while some are. */
    const openCount = yield* SubscriptionRef.make(0)
    const whileOpen = (every: Duration.Duration, step: Effect.Effect<void>) =>
      openCount.changes.pipe(Stream.filter((n) => n > 0), Stream.runHead).pipe(
        Effect.zipRight(Effect.sleep(every)),
        Effect.zipRight(step),
        Effect.forever,
        Effect.forkScoped
      )
    // Every stream's heartbeat, one timer for all; a stream whose client has stopped reading ends.
    yield* whileOpen(
      HEARTBEAT,
      Effect.sync(() => {
        for (const open of opens) {
          if (open.sink.stalled()) open.sink.end(Blocks.SLOW_CONSUMER)
          else if (open.sink.room > 0) open.sink.write(Blocks.HEARTBEAT_COMMENT)
        }
      })
    )
    // The keys of the open streams, each looked at once per RECHECK_AFTER: a revoked key's streams end.
    yield* whileOpen(
      RECHECK_AFTER,
      Effect.suspend(() =>
        Effect.forEach([...places.keys()], (key) =>
          Effect.flatMap(keys.isRevoked(key), (revoked) =>
            Effect.sync(() => {
              if (revoked) { for (const open of opens) if (open.key === key) open.sink.end(Blocks.REVOKED) }
            })), { concurrency: "unbounded", discard: true })
      )
    )
    // The drain: every stream ends once the listener stops accepting connections, and none opens after.
    yield* lifecycle.stoppedAccepting.pipe(
      Effect.zipRight(
        lock.withPermits(1)(Effect.sync(() => {
          stopped = true
          for (const open of opens) open.sink.cut()
        }))
      ),
      Effect.forkScoped
    )

    /** A stream that ended: its place among the limits is free, and with the last one the streams stop following. */
    const closed = (open: Open) => {
      opens.delete(open)
      lifecycle.lasting.delete(open.request)
      places.free(open.key)
      runFork(Effect.zipRight(SubscriptionRef.set(openCount, opens.size), unfollowWhenNoneOpen))
    }

    /**
     * The event stream after `after` (a position, `start`, or `now`: where the process's reads of the feed stand), for
     * the request's key; refused before it starts past the limits (with `Retry-After`).
     */
    const stream = (after: string, status: PetStatus | undefined, request: Request) =>
      Effect.gen(function*() {
        const { id: key } = yield* CurrentApiKey
        const opened = yield* lock.withPermits(1)(Effect.gen(function*() {
          if (stopped) return STOPPED
          // Where it resumes, against where the streams' reads stand (`now`); the feed's end is read only when the
          // streams follow nothing yet, or for a position past their reads.
          const read = following === undefined ? yield* feed.feedEnd : undefined
          let position = resumeFrom(after, read ?? { database, end: handed })
          if (position === undefined && read === undefined) position = resumeFrom(after, yield* feed.feedEnd)
          if (position === undefined) return undefined
          const refused = places.refusal(key)
          if (refused !== undefined) return yield* Effect.fail(refused)
          const from = yield* follow(read)
          const open: Open = { sink: undefined!, key, status, last: position, live: position >= from, request }
          const { response, sink } = ServerSentEvents.makeSink(Blocks.BEHIND_BLOCKS, closed, open)
          open.sink = sink
          opens.add(open)
          lifecycle.lasting.add(request)
          places.take(key)
          yield* SubscriptionRef.set(openCount, opens.size)
          sink.write(Blocks.RETRY_BLOCK)
          return { open, response }
        })).pipe(
          Effect.tapError((error) =>
            error._tag === "SqlError"
              ? Effect.void
              : addResponseHeaders({ "retry-after": String(STREAMS_RETRY_AFTER_SECONDS) })
          ),
          orUnavailable
        )
        if (opened === STOPPED) return ServerSentEvents.complete(Blocks.RETRY)
        if (opened === undefined) return ServerSentEvents.complete(Blocks.GIVING_UP_RETRY, Blocks.RESET)
        if (!opened.open.live) yield* FiberSet.run(fibers, catchUp(opened.open))
        return opened.response
      })

    return { stream }
  })
}) {}
