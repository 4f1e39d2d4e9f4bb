/**
 * The change feed as Server-Sent Events (`GET /v1/pets/changes` with `Accept: text/event-stream`): a `retry:` hint,
 * then an event `created` per pet (`id:` its position, `data:` the pet as the API answers it), and an id-only event
 * for a pet the status filter passes over (the client's `Last-Event-ID` moves past it). A stream is not a request that
 * takes too long: `REQUEST_TIMEOUT` bounds only its start.
 *
 * Each change is encoded once, whatever the number of streams, and written to each stream's body as the feed hands it
 * over (`ServerSentEvents.Sink`). The streams of the process share one heartbeat (a comment every HEARTBEAT, so that
 * neither the listener, whose idle timeout is past 30 seconds, nor a proxy with an idle timeout of 10 seconds or more
 * takes a stream for idle) and one check of their keys (every RECHECK_AFTER).
 *
 * A stream ends with an event that says why, where it can still be written: `reset` for a position the feed cannot
 * resume from (the 410's body: a browser sees no status once it is connected), `error` with `slow_consumer` when the
 * client has not read BEHIND_BYTES of what was written, `unauthorized` when its key is revoked, `unavailable` when
 * the database fails. It ends without one when the server stops accepting connections (the drain), so that the
 * client reconnects to another replica.
 */
import type { SqlError } from "@effect/sql"
import { Config, Duration, Effect, Schema, Stream, SubscriptionRef } from "effect"
import { CurrentApiKey } from "../Auth/Api.js"
import { ApiKeys, RECHECK_AFTER } from "../Auth/ApiKeys.js"
import { positiveInteger } from "../Config.js"
import type { ApiKeyId } from "../Domain/ApiKey.js"
import {
  errorBody,
  feedPositionGone,
  FeedPositionGoneResponse,
  type TooManyStreams,
  tooManyStreams,
  unauthorized,
  UnauthorizedResponse,
  type Unavailable,
  unavailable,
  UnavailableResponse
} from "../Domain/Errors.js"
import { formatPosition, resumeFrom } from "../Domain/Feed.js"
import { Pet, type PetStatus } from "../Domain/Pet.js"
import { Lifecycle } from "../Operations/Lifecycle.js"
import { addResponseHeaders } from "../ResponseHeaders.js"
import * as ServerSentEvents from "../ServerSentEvents.js"
import { orUnavailable } from "../Unavailable.js"
import { type FeedChange, type FeedEnd, PetsFeed } from "./Feed.js"

/** How often every stream writes a comment. */
export const HEARTBEAT = Duration.seconds(5)
/** How long a client waits before it reconnects (`retry:`). */
export const RECONNECT_AFTER = Duration.seconds(2)
/** A stream whose client has not read this much of what was written is ended (`slow_consumer`). */
export const BEHIND_BYTES = 256 * 1024
/** How many changes may come for a stream while it still reads what it missed; past them it is ended. */
const WAITING_MAX = 10_000
/** How long a refused stream is told to wait before it tries again (`Retry-After`). */
export const STREAMS_RETRY_AFTER_SECONDS = 5

/** `FEED_STREAMS_PER_KEY` and `FEED_STREAMS`: the open event streams one API key, and one process, may have. */
export const FeedLimitsConfig = Config.all({
  perKey: positiveInteger("FEED_STREAMS_PER_KEY", "the event streams one API key may hold open, such as 10").pipe(
    Config.withDefault(10)
  ),
  perProcess: positiveInteger("FEED_STREAMS", "the event streams this process serves at once, such as 10000").pipe(
    Config.withDefault(10_000)
  )
})

const encodePet = Schema.encodeSync(Schema.parseJson(Pet))
const errorEvent = (name: string, data: unknown) =>
  ServerSentEvents.encode(ServerSentEvents.event({ event: name, data: JSON.stringify(data) }))

const RETRY = ServerSentEvents.retry(Duration.toMillis(RECONNECT_AFTER))
const HEARTBEAT_COMMENT = ServerSentEvents.encode(ServerSentEvents.comment("heartbeat"))
const RESET = ServerSentEvents.event({
  event: "reset",
  data: JSON.stringify(Schema.encodeSync(FeedPositionGoneResponse)(feedPositionGone()))
})
const SLOW_CONSUMER = errorEvent(
  "error",
  errorBody(
    503,
    "slow_consumer",
    `The client did not read ${BEHIND_BYTES / 1024} KiB of the stream, which was ended; reconnect with Last-Event-ID ` +
      "to go on from the last event received."
  )
)
const REVOKED = errorEvent("error", Schema.encodeSync(UnauthorizedResponse)(unauthorized("The API key was revoked.")))
const DATABASE_FAILED = errorEvent("error", Schema.encodeSync(UnavailableResponse)(unavailable()))

/** An open stream. */
interface Open {
  readonly sink: ServerSentEvents.Sink
  readonly key: ApiKeyId
  readonly status: PetStatus | undefined
  /** The last position written (or passed over). */
  last: number
  /** Changes handed over while it still reads what it missed from the table; then written as they come. */
  caughtUp: boolean
  readonly waiting: Array<FeedChange>
}

export class FeedEvents extends Effect.Service<FeedEvents>()("Pets/FeedEvents", {
  dependencies: [PetsFeed.Default],
  scoped: Effect.gen(function*() {
    const feed = yield* PetsFeed
    const keys = yield* ApiKeys
    const lifecycle = yield* Lifecycle
    // What an open stream runs on: the service's, so that it holds nothing of the request that opened it.
    const runtime = yield* Effect.runtime<never>()
    const limits = yield* FeedLimitsConfig
    const opens = new Set<Open>()
    const byKey = new Map<ApiKeyId, number>()

    /** A change's two encodings, made at its first write and shared by every stream it is written to. */
    const encoded = new WeakMap<FeedChange, { readonly created: Uint8Array; readonly passed: Uint8Array }>()
    const blockOf = (database: string, change: FeedChange, status: PetStatus | undefined) => {
      let blocks = encoded.get(change)
      if (blocks === undefined) {
        const id = formatPosition(database, change.position)
        blocks = {
          created: ServerSentEvents.encode(
            ServerSentEvents.event({ id, event: "created", data: encodePet(change.pet) })
          ),
          passed: ServerSentEvents.encode(ServerSentEvents.event({ id }))
        }
        encoded.set(change, blocks)
      }
      return status === undefined || change.pet.status === status ? blocks.created : blocks.passed
    }
    /** Writes the changes past the stream's last position; false when its client is too far behind. */
    const write = (open: Open, database: string, changes: Iterable<FeedChange>) => {
      let keeping = true
      for (const change of changes) {
        if (change.position <= open.last) continue
        open.last = change.position
        keeping = open.sink.write(blockOf(database, change, open.status))
      }
      return keeping
    }

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

    /** Its place among the open streams, if the limits leave one (else the refusal), until the scope closes. */
    const admit = (open: Open) =>
      Effect.acquireRelease(
        Effect.suspend((): Effect.Effect<void, TooManyStreams | Unavailable> => {
          if ((byKey.get(open.key) ?? 0) >= limits.perKey) return Effect.fail(tooManyStreams(limits.perKey))
          if (opens.size >= limits.perProcess) {
            return Effect.fail(unavailable(
              "This server has as many change streams open as it serves (FEED_STREAMS); try again shortly, or " +
                "another replica."
            ))
          }
          opens.add(open)
          byKey.set(open.key, (byKey.get(open.key) ?? 0) + 1)
          return SubscriptionRef.set(openCount, opens.size)
        }),
        () =>
          Effect.suspend(() => {
            opens.delete(open)
            const left = byKey.get(open.key)! - 1
            if (left === 0) byKey.delete(open.key)
            else byKey.set(open.key, left)
            return SubscriptionRef.set(openCount, opens.size)
          })
      )

    /** Writes what the stream missed, from the table up to where the feed stood when it joined; then the rest. */
    const catchUp = (open: Open, database: string, from: number) =>
      Effect.gen(function*() {
        while (open.last < from) {
          const changes = yield* feed.changesAfter(open.last)
          if (changes.length === 0) break
          if (!write(open, database, changes)) yield* open.sink.drained
        }
        yield* Effect.sync(() => {
          open.caughtUp = true
          if (!write(open, database, open.waiting.splice(0))) open.sink.end(SLOW_CONSUMER)
        })
      })

    /**
     * The event stream after `after` (a position, `start` or `now`) of the feed that ends at `end`, for the
     * request's key; refused before it starts past the limits (with `Retry-After`).
     */
    const stream = (after: string, end: FeedEnd, status: PetStatus | undefined) =>
      Effect.gen(function*() {
        const from = resumeFrom(after, end)
        if (from === undefined) return ServerSentEvents.complete(RETRY, RESET)
        const { id: key } = yield* CurrentApiKey
        return yield* ServerSentEvents.respond(runtime, BEHIND_BYTES, (sink) =>
          Effect.gen(function*() {
            const open: Open = { sink, key, status, last: from, caughtUp: false, waiting: [] }
            yield* admit(open)
            sink.write(ServerSentEvents.encode(RETRY))
            const joined = yield* feed.join({
              deliver: (changes) => {
                if (open.caughtUp) return write(open, end.database, changes)
                open.waiting.push(...changes)
                return open.waiting.length <= WAITING_MAX
              },
              dropped: () => sink.end(SLOW_CONSUMER)
            })
            yield* catchUp(open, end.database, joined.end).pipe(
              Effect.catchAll((error: SqlError.SqlError) =>
                Effect.zipRight(
                  Effect.logError("the change feed's stream could not read the database", error).pipe(
                    Effect.annotateLogs("keyId", key)
                  ),
                  Effect.sync(() => sink.end(DATABASE_FAILED))
                )
              ),
              Effect.forkScoped
            )
          })).pipe(
            Effect.tapError((error) =>
              error._tag === "SqlError"
                ? Effect.void
                : addResponseHeaders({ "retry-after": String(STREAMS_RETRY_AFTER_SECONDS) })
            ),
            orUnavailable
          )
      })

    return { stream }
  })
}) {}
