/**
 * The typed client's follower of the change feed (`GET /v1/pets/changes`, a JSON long poll): a `Stream` of the pets
 * added, which polls on from each page's `next` and, after a failure that can pass, sends the same poll again with
 * backoff. Like `Client.ts`, it needs only `effect` and `@effect/platform` and the declarations.
 */
import {
  HttpApiClient,
  type HttpApiError,
  HttpClient,
  HttpClientError,
  type HttpClientResponse
} from "@effect/platform"
import { Chunk, Clock, Duration, Effect, Option, type ParseResult, Schedule, Schema, Stream } from "effect"
import { Api } from "./Api.js"
import type * as Errors from "./Domain/Errors.js"
import { type Change as ChangeSchema, ChangesQuery, WAIT_MAX } from "./Domain/Feed.js"
import type { PetStatus } from "./Domain/Pet.js"

/** A pet added to the catalogue, at its position in the feed: `changes({ after: position })` resumes after it. */
export type Change = typeof ChangeSchema.Type

export interface ChangesOptions {
  /**
   * Where to start: a position (a change's, or a list page's `position`), `start` (from the first pet) or `now` (the
   * default: the pets added after the first answer it receives, to a first poll that does not wait).
   */
  readonly after?: string | undefined
  /** Only the pets with this status (the stream still moves past the others). */
  readonly status?: PetStatus | undefined
  /** Seconds a poll waits for a change, 0 to 25; by default the service's (20). */
  readonly wait?: number | undefined
}

/**
 * What ends the stream: a refused key, a position the feed cannot resume from, a query the service (or, before
 * sending, the schemas) refuses, a body the schemas refuse, or an HTTP failure that no retry mends (an invalid base
 * URL, an answer the API does not declare, such as the 404 of a wrong base URL).
 */
export type ChangesError =
  | Errors.Unauthorized
  | Errors.FeedPositionGone
  | Errors.BadRequest
  | HttpApiError.HttpApiDecodeError
  | HttpClientError.HttpClientError
  | ParseResult.ParseError

/** The longest a poll may take, answer read, before it counts as a lost connection: its longest wait, and 15 s. */
const POLL_TIMEOUT = Duration.seconds(WAIT_MAX + 15)

/** What a retry is decided on: a transient answer, or a transport failure (`HttpClient.retryTransient`'s). */
type Attempt = HttpClientResponse.HttpClientResponse | HttpClientError.HttpClientError

/** The time an answer's `Retry-After` (seconds or an HTTP date) asks to wait, zero without one. */
const retryAfter = (attempt: Attempt, now: number): Duration.Duration => {
  const response = HttpClientError.isHttpClientError(attempt)
    ? attempt._tag === "ResponseError" ? attempt.response : undefined
    : attempt
  const value = response?.headers["retry-after"]?.trim()
  if (value === undefined || value === "") return Duration.zero
  if (/^[0-9]+$/.test(value)) return Duration.seconds(Number(value))
  const date = Date.parse(value)
  return Number.isNaN(date) ? Duration.zero : Duration.millis(Math.max(0, date - now))
}

/**
 * When a poll is sent again: after 200 ms, doubling, jittered, about 10 s at most, and never before the answer's
 * `Retry-After`. It never gives up: what cannot pass is not retried.
 */
const reconnect: Schedule.Schedule<unknown, Attempt> = Schedule.exponential("200 millis").pipe(
  Schedule.union(Schedule.spaced("10 seconds")),
  Schedule.jittered,
  Schedule.intersect(Schedule.identity<Attempt>()),
  Schedule.modifyDelayEffect(([, attempt], delay) =>
    Effect.map(Clock.currentTimeMillis, (now) => Duration.max(delay, retryAfter(attempt, now)))
  )
)

/**
 * The client a poll goes through: its answer is read whole within `POLL_TIMEOUT` (a connection cut or silent is a
 * transport failure), and a transport failure or a transient answer sends the same request again on `reconnect`.
 */
const following = (client: HttpClient.HttpClient): HttpClient.HttpClient =>
  client.pipe(
    HttpClient.transform((answer, request) =>
      answer.pipe(
        Effect.tap((response) =>
          Effect.mapError(response.arrayBuffer, (cause) =>
            new HttpClientError.RequestError({
              request,
              reason: "Transport",
              cause,
              description: "the answer was cut off"
            }))
        ),
        Effect.timeoutFail({
          duration: POLL_TIMEOUT,
          onTimeout: () =>
            new HttpClientError.RequestError({
              request,
              reason: "Transport",
              description: `no answer within ${Duration.format(POLL_TIMEOUT)}`
            })
        })
      )
    ),
    HttpClient.retryTransient({ schedule: reconnect })
  )

/** `changes` of a client sending its requests through `client` (the key already on them) to `baseUrl`. */
export const makeChanges = (client: HttpClient.HttpClient, baseUrl: string) =>
  Effect.map(
    HttpApiClient.endpoint(Api, {
      group: "pets",
      endpoint: "listPetChanges",
      httpClient: following(client),
      baseUrl
    }),
    (poll) => (options: ChangesOptions = {}): Stream.Stream<Change, ChangesError> => {
      const status = options.status === undefined ? {} : { status: options.status }
      const wait = options.wait === undefined ? {} : { wait: options.wait }
      // `now` is resolved by a poll that answers at once (`wait=0`): every poll that waits, and every retry of one
      // whose answer was lost, is sent from a position, so a lost answer never skips the pets it held.
      const pages = Stream.paginateChunkEffect(options.after ?? "now", (after) =>
        poll({ urlParams: { ...status, ...(after === "now" ? { wait: 0 } : wait), after }, headers: {} }).pipe(
          // `following` retries these without end: they never reach here. A poll is no event stream: never too many.
          Effect.catchTags({ RateLimited: Effect.die, Unavailable: Effect.die, TooManyStreams: Effect.die }),
          Effect.map((page) =>
            [Chunk.unsafeFromArray(page.changes), Option.some(page.next)] as const
          )
        ))
      // The wait asked is refused before any poll, though the first may not send it.
      return Stream.unwrap(Effect.as(Schema.encode(ChangesQuery)({ ...status, ...wait }), pages))
    }
  )
