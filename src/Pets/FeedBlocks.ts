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
import type { FeedChange } from "./Feed.js"

/** How long a client waits before it reconnects (`retry:`). */
const RECONNECT_AFTER = Duration.seconds(2)
/** A stream whose client has not read this many of the blocks written is ended (`slow_consumer`). */
export const BEHIND_BLOCKS = 1_000
const encodePet = Schema.encodeSync(Schema.parseJson(Pet))
const errorEvent = (name: string, data: unknown) =>
  ServerSentEvents.encode(ServerSentEvents.event({ event: name, data: JSON.stringify(data) }))

export const RETRY = ServerSentEvents.retry(Duration.toMillis(RECONNECT_AFTER))
export const RETRY_BLOCK = ServerSentEvents.encode(RETRY)
export const HEARTBEAT_COMMENT = ServerSentEvents.encode(ServerSentEvents.comment("heartbeat"))
export const RESET = ServerSentEvents.event({
  event: "reset",
  data: JSON.stringify(Schema.encodeSync(FeedPositionGoneResponse)(feedPositionGone()))
})
export const SLOW_CONSUMER = errorEvent(
  "error",
  errorBody(
    503,
    "slow_consumer",
    `The client did not read ${BEHIND_BLOCKS} events of the stream, which was ended; reconnect with Last-Event-ID ` +
      "to go on from the last event received."
  )
)
export const REVOKED = errorEvent(
  "error",
  Schema.encodeSync(UnauthorizedResponse)(unauthorized("The API key was revoked."))
)
export const DATABASE_FAILED = errorEvent("error", Schema.encodeSync(UnavailableResponse)(unavailable()))

/**
 * A change's event for a stream with this status filter: `created` with the pet, or an id alone for a pet the filter
 * passes over. Both encodings are made at a change's first write and shared by every stream it is written to.
 */
export const makeBlockOf = () => {
  const encoded = new WeakMap<FeedChange, { readonly created: Uint8Array; readonly passed: Uint8Array }>()
  return (database: string, change: FeedChange, status: PetStatus | undefined) => {
    let blocks = encoded.get(change)
    if (blocks === undefined) {
      const id = formatPosition(database, change.position)
      blocks = {
        created: ServerSentEvents.encode(ServerSentEvents.event({ id, event: "created", data: encodePet(change.pet) })),
        passed: ServerSentEvents.encode(ServerSentEvents.event({ id }))
      }
      encoded.set(change, blocks)
    }
    return status === undefined || change.pet.status === status ? blocks.created : blocks.passed
  }
}
