/**
 * The change feed as Server-Sent Events (`GET /v1/pets/changes` with `Accept: text/event-stream`): a `retry:` hint,
 * then an event `created` per pet (`id:` its position, `data:` the pet as the API answers it), an id-only event for a
 * pet the status filter passes over (the client's `Last-Event-ID` moves past it), and a comment every HEARTBEAT so
 * that neither the listener (its idle timeout is past 30 seconds) nor a proxy with an idle timeout of 10 seconds or
 * more takes the stream for idle. It is not a request that takes too long: `REQUEST_TIMEOUT` bounds only its start.
 *
 * A stream ends with an event that says why, where it can still be written: `reset` for a position the feed cannot
 * resume from (the 410's body: a browser sees no status once it is connected), `error` with `slow_consumer` when the
 * client fell `QUEUE_CHANGES` behind (`Feed.ts`), `unauthorized` when its key is revoked, `unavailable` when the
 * database fails. It ends without one when the server stops accepting connections (the drain), so that the client
 * reconnects to another replica.
 */
import type { SqlError } from "@effect/sql"
import { Duration, Effect, Schedule, Schema, Stream } from "effect"
import { CurrentApiKey } from "../Auth/Api.js"
import { ApiKeys } from "../Auth/ApiKeys.js"
import {
  errorBody,
  feedPositionGone,
  FeedPositionGoneResponse,
  unauthorized,
  UnauthorizedResponse,
  unavailable,
  UnavailableResponse
} from "../Domain/Errors.js"
import { formatPosition, resumeFrom } from "../Domain/Feed.js"
import { Pet, type PetStatus } from "../Domain/Pet.js"
import { Lifecycle } from "../Operations/Lifecycle.js"
import { addResponseHeaders } from "../ResponseHeaders.js"
import * as ServerSentEvents from "../ServerSentEvents.js"
import { orUnavailable } from "../Unavailable.js"
import {
  type FeedChange,
  type FeedEnd,
  FellBehind,
  PetsFeed,
  QUEUE_CHANGES,
  STREAMS_RETRY_AFTER_SECONDS
} from "./Feed.js"

/** How often an idle stream writes a comment. */
export const HEARTBEAT = Duration.seconds(5)
/** How long a client waits before it reconnects (`retry:`). */
export const RECONNECT_AFTER = Duration.seconds(2)

/** The key a stream was opened with has been revoked. */
class Revoked {
  readonly _tag = "Revoked"
}

const encodePet = Schema.encodeSync(Schema.parseJson(Pet))
const errorData = <A, I>(schema: Schema.Schema<A, I>, error: A) => JSON.stringify(Schema.encodeSync(schema)(error))

const RETRY = ServerSentEvents.retry(Duration.toMillis(RECONNECT_AFTER))
const RESET = ServerSentEvents.event({ event: "reset", data: errorData(FeedPositionGoneResponse, feedPositionGone()) })
const ENDED: Record<"FellBehind" | "Revoked" | "SqlError", string> = {
  FellBehind: ServerSentEvents.event({
    event: "error",
    data: JSON.stringify(errorBody(
      503,
      "slow_consumer",
      `The stream fell ${QUEUE_CHANGES} changes behind and was ended; reconnect with Last-Event-ID to go on from the ` +
        "last event received."
    ))
  }),
  Revoked: ServerSentEvents.event({
    event: "error",
    data: errorData(UnauthorizedResponse, unauthorized("The API key was revoked."))
  }),
  SqlError: ServerSentEvents.event({ event: "error", data: errorData(UnavailableResponse, unavailable()) })
}
const HEARTBEAT_COMMENT = ServerSentEvents.comment("heartbeat")

export class FeedEvents extends Effect.Service<FeedEvents>()("Pets/FeedEvents", {
  dependencies: [PetsFeed.Default],
  effect: Effect.gen(function*() {
    const feed = yield* PetsFeed
    const keys = yield* ApiKeys
    const lifecycle = yield* Lifecycle
    const heartbeats = Stream.repeatEffectWithSchedule(Effect.succeed(HEARTBEAT_COMMENT), Schedule.spaced(HEARTBEAT))

    const eventOf = (database: string, status: PetStatus | undefined) => ({ pet, position }: FeedChange) =>
      ServerSentEvents.event(
        status === undefined || pet.status === status
          ? { id: formatPosition(database, position), event: "created", data: encodePet(pet) }
          : { id: formatPosition(database, position) }
      )

    /**
     * The event stream after `after` (a position, `start` or `now`) of the feed that ends at `end`, of the request's
     * key; refused before it starts past the limits (`Retry-After`).
     */
    const stream = (after: string, end: FeedEnd, status: PetStatus | undefined) =>
      Effect.gen(function*() {
        const from = resumeFrom(after, end)
        if (from === undefined) return ServerSentEvents.response(Stream.make(RETRY, RESET))
        const key = yield* CurrentApiKey
        const changes = yield* feed.open(from, key.id).pipe(
          Effect.tapError((error) =>
            error._tag === "SqlError"
              ? Effect.void
              : addResponseHeaders({ "retry-after": String(STREAMS_RETRY_AFTER_SECONDS) })
          ),
          orUnavailable
        )
        const events = changes.pipe(
          Stream.map(eventOf(end.database, status)),
          Stream.interruptWhen(Effect.zipRight(keys.whenRevoked(key.id), Effect.fail(new Revoked()))),
          Stream.catchAll((reason: FellBehind | Revoked | SqlError.SqlError) =>
            Stream.fromEffect(
              reason._tag === "SqlError"
                ? Effect.as(Effect.logError("the change feed's stream failed", reason), ENDED.SqlError)
                : Effect.succeed(ENDED[reason._tag])
            )
          ),
          Stream.interruptWhen(lifecycle.stoppedAccepting),
          Stream.merge(heartbeats, { haltStrategy: "left" })
        )
        return ServerSentEvents.response(Stream.concat(Stream.make(RETRY), events))
      })

    return { stream }
  })
}) {}
