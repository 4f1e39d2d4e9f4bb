/**
 * The change feed's schemas: the query of listPetChanges and its page. A position is an opaque token on the wire:
 * `<database's feed id>.<position>`, where positions grow in commit order.
 */
import { Schema } from "effect"
import { IntBetweenFromString, Limit, Pet, PetId, PetStatus } from "./Pet.js"

export const WAIT_MIN = 0
export const WAIT_MAX = 25
export const WAIT_DEFAULT = 20

/** The feed position of a list, on each of its 200 answers. */
export const FEED_POSITION_HEADER = "Feed-Position"

const POSITION_EXAMPLE = "4f2a9c01d3b7e865.42"

export const FeedPosition = Schema.String.annotations({
  identifier: "FeedPosition",
  description: "An opaque position in the change feed: resume after it with `?after=`.",
  examples: [POSITION_EXAMPLE]
})

/** The seconds a long poll waits for a change. */
export const Wait = IntBetweenFromString(
  WAIT_MIN,
  WAIT_MAX,
  WAIT_DEFAULT,
  "Seconds to wait for a change before answering an empty page; 0 answers at once"
)

/** The header an `EventSource` resumes with: the id of the last event it received, a position. */
export const LAST_EVENT_ID_HEADER = "Last-Event-ID"

/** The headers of listPetChanges, as HttpApi reads them: `LAST_EVENT_ID_HEADER` in lower case. */
export const ChangesHeaders = Schema.Struct({
  "last-event-id": Schema.optional(FeedPosition.annotations({
    description: "An event stream's resume point, as `EventSource` sends it when it reconnects: the id of the last " +
      "event received. It takes the place of `after`."
  }))
})

/** The query of listPetChanges. Unknown parameters are ignored. */
export const ChangesQuery = Schema.Struct({
  after: Schema.optional(Schema.String.annotations({
    description: "Where to resume: a position (a page's `next`, a change's `position`, a list's `Feed-Position`), " +
      "`start` (from the first pet) or `now` (the default: only what is created from now on; for an event stream, " +
      "from where the server's reads of the feed stand).",
    examples: ["now"]
  })),
  wait: Schema.optional(Wait),
  limit: Schema.optional(Limit),
  status: Schema.optional(PetStatus.annotations({ description: "Return only animals with this status." }))
})
export type ChangesQuery = typeof ChangesQuery.Type

export const Change = Schema.Struct({
  position: FeedPosition,
  pet: Pet
}).annotations({
  identifier: "Change",
  description: "A pet added to the catalogue, at its position in the feed."
})

export const Changes = Schema.Struct({
  changes: Schema.Array(Change),
  next: FeedPosition.annotations({
    description: "Where the next request resumes (`?after=`): past every pet this page passed, filtered out or not."
  })
}).annotations({
  identifier: "Changes",
  description: "A page of the change feed, in commit order; empty when nothing came within `wait` seconds.",
  examples: [{
    changes: [{
      position: POSITION_EXAMPLE,
      pet: { id: PetId.make(42), name: "Rex", categoryId: 1, status: "available" }
    }],
    next: POSITION_EXAMPLE
  }]
})
export type Changes = typeof Changes.Type

/** A position on the wire: the database's feed id, a dot, the position. */
export const formatPosition = (database: string, position: number): string => `${database}.${position}`

const POSITION = /^([0-9a-f]{16})\.(0|[1-9][0-9]{0,15})$/

/**
 * Where `after` resumes, given the feed's database id and end: `start` is 0, `now` the end; a position of this
 * database at most the end is itself. Anything else (malformed, another database's, ahead of the end): undefined.
 */
export const resumeFrom = (after: string, feed: { readonly database: string; readonly end: number }) => {
  if (after === "now") return feed.end
  if (after === "start") return 0
  const parsed = POSITION.exec(after)
  if (parsed === null || parsed[1] !== feed.database) return undefined
  const position = Number(parsed[2])
  return Number.isSafeInteger(position) && position <= feed.end ? position : undefined
}
