/**
 * What a change-feed stream writes (`FeedEvents.ts`): its `retry:` hint, its heartbeat, an event per change, and the
 * event that says why it ends. Each is encoded once: the fixed ones here, a change's at its first write.
 */
import { Duration, Schema } from "effect"
import {
  errorBody,
  feedPositionGone,
  FeedPositionGoneResponse,
  unauthorized,
  UnauthorizedResponse,
  unavailable,
  UnavailableResponse
} from "../Domain/Errors.js"
import { formatPosition } from "../Domain/Feed.js"
import { Pet, type PetStatus } from "../Domain/Pet.js"
import * as ServerSentEvents from "../ServerSentEvents.js"
import { type FeedChange, passesOver } from "./Feed.js"

/** How long a client waits before it reconnects (`retry:`). */
const RECONNECT_AFTER = Duration.seconds(2)
/**
 * How long it waits after a stream that cannot go on from where it stands (`reset`, or an event the server cannot
 * write): an `EventSource` that ignores the event reconnects to the same answer, but not every few seconds.
 */
const RECONNECT_AFTER_GIVING_UP = Duration.minutes(10)
/** The most blocks a stream holds for its client; one full whose client has stopped reading is ended (`slow_consumer`). */
export const BEHIND_BLOCKS = 1_000
const encodePet = Schema.encodeSync(Schema.parseJson(Pet))
/** An `error` event, after a `retry:` hint when given. */
const errorEvent = (data: unknown, retry = "") =>
  ServerSentEvents.encode(retry + ServerSentEvents.event({ event: "error", data: JSON.stringify(data) }))

export const RETRY = ServerSentEvents.retry(Duration.toMillis(RECONNECT_AFTER))
export const RETRY_BLOCK = ServerSentEvents.encode(RETRY)
export const GIVING_UP_RETRY = ServerSentEvents.retry(Duration.toMillis(RECONNECT_AFTER_GIVING_UP))
export const HEARTBEAT_COMMENT = ServerSentEvents.encode(ServerSentEvents.comment("heartbeat"))
export const RESET = ServerSentEvents.event({
  event: "reset",
  data: JSON.stringify(Schema.encodeSync(FeedPositionGoneResponse)(feedPositionGone()))
})
export const SLOW_CONSUMER = errorEvent(
  errorBody(
    503,
    "slow_consumer",
    `The client stopped reading with ${BEHIND_BLOCKS} events waiting, and the stream was ended; reconnect with ` +
      "Last-Event-ID to go on from the last event received."
  )
)
export const REVOKED = errorEvent(
  Schema.encodeSync(UnauthorizedResponse)(unauthorized("The API key was revoked."))
)
export const DATABASE_FAILED = errorEvent(Schema.encodeSync(UnavailableResponse)(unavailable()))
/** The next event cannot be written (the pet is one its schema refuses): the stream ends before it. */
export const EVENT_FAILED = errorEvent(
  errorBody(
    500,
    "internal_error",
    "The server could not write the next event of this stream; it has been logged. Reconnecting with Last-Event-ID " +
      "meets the same event until that is fixed."
  ),
  GIVING_UP_RETRY
)

/**
 * A change's event for a stream with this status filter: `created` with the pet, or an id alone for a pet the filter
 * passes over. Each is encoded at its first write and shared by every stream it is written to. It throws for a row
 * its schema refuses (`FeedChange.refused`) that the filter does not pass over (`passesOver`).
 */
export const makeBlockOf = () => {
  const created = new WeakMap<FeedChange, Uint8Array>()
  const passed = new WeakMap<FeedChange, Uint8Array>()
  return (database: string, change: FeedChange, status: PetStatus | undefined) => {
    const pet = passesOver(change, status) ? undefined : change.pet
    if (pet === undefined && change.refused !== undefined && !passesOver(change, status)) throw change.refused
    const encoded = pet === undefined ? passed : created
    let block = encoded.get(change)
    if (block === undefined) {
      const id = formatPosition(database, change.position)
      block = ServerSentEvents.encode(
        ServerSentEvents.event(pet === undefined ? { id } : { id, event: "created", data: encodePet(pet) })
      )
      encoded.set(change, block)
    }
    return block
  }
}
