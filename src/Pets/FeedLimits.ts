/**
 * The places of the open event streams among their limits: `FEED_STREAMS_PER_KEY` streams for one API key, `FEED_STREAMS`
 * for the process. A stream refused is told to try again after STREAMS_RETRY_AFTER_SECONDS (`Retry-After`).
 */
import { Config, Effect } from "effect"
import { positiveInteger } from "../Config.js"
import type { ApiKeyId } from "../Domain/ApiKey.js"
import { type TooManyStreams, tooManyStreams, type Unavailable, unavailable } from "../Domain/Errors.js"

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

/** The streams each key holds open, against the limits the configuration gives. */
export const makeStreamPlaces = Effect.map(FeedLimitsConfig, (limits) => {
  const byKey = new Map<ApiKeyId, number>()
  let open = 0
  return {
    /** The keys that hold a stream open. */
    keys: () => byKey.keys(),
    /** Why a new stream of `key` is refused, if the limits refuse it. */
    refusal: (key: ApiKeyId): TooManyStreams | Unavailable | undefined => {
      if ((byKey.get(key) ?? 0) >= limits.perKey) return tooManyStreams(limits.perKey)
      if (open >= limits.perProcess) {
        return unavailable(
          "This server has as many change streams open as it serves (FEED_STREAMS); try again shortly, or another " +
            "replica."
        )
      }
      return undefined
    },
    take: (key: ApiKeyId) => {
      open++
      byKey.set(key, (byKey.get(key) ?? 0) + 1)
    },
    free: (key: ApiKeyId) => {
      open--
      const left = byKey.get(key)! - 1
      if (left === 0) byKey.delete(key)
      else byKey.set(key, left)
    }
  }
})
