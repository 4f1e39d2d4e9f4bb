/**
 * The quota of each API key (`RATE_LIMIT`), counted once per authenticated request by the `Authorization` middleware
 * right after the key: `@effect/experimental`'s `RateLimiter`, a fixed window per key, counted in the process's memory
 * on SQLite (one process serves a SQLite file) and in the database on PostgreSQL (every replica counts against the same
 * quota: `PostgresStore.ts`). Every answer states the quota (draft-ietf-httpapi-ratelimit-headers-10), past it the
 * answer is 429 `rate_limited` with `Retry-After`, and nothing is done:
 *
 *     RateLimit-Policy: "default";q=100;w=60      the policy: q requests per window of w seconds
 *     RateLimit: "default";r=42;t=17              what is left of it: r requests, all of it back in t seconds
 *
 * Both fields are Structured Field Lists (RFC 9651) of one item: the policy's name as a String, Integer parameters.
 */
import { RateLimiter } from "@effect/experimental"
import { SqlClient } from "@effect/sql"
import { Config, Duration, Effect, Either, Layer, Option } from "effect"
import { variable } from "../Config.js"
import { type RateLimited, rateLimited, type Unavailable } from "../Domain/Errors.js"
import { addResponseHeaders } from "../ResponseHeaders.js"
import { answerUnavailable } from "../Unavailable.js"
import { makePostgresStore } from "./PostgresStore.js"

/** `limit` requests (`q`) per window of `windowSeconds` (`w`). */
export interface Policy {
  readonly limit: number
  readonly windowSeconds: number
}

const FORM = /^([1-9][0-9]{0,8})\/(second|minute|hour)$/
const SECONDS = { second: 1, minute: 60, hour: 3600 } as const

/** The policy a `RATE_LIMIT` value names: `None` for `off`, `undefined` for a value that is not one of the forms. */
export const parsePolicy = (text: string): Option.Option<Policy> | undefined => {
  const value = text.trim().toLowerCase()
  if (value === "off" || value === "") return Option.none()
  const match = FORM.exec(value)
  if (match === null) return undefined
  return Option.some({ limit: Number(match[1]), windowSeconds: SECONDS[match[2] as keyof typeof SECONDS] })
}

/** `RATE_LIMIT`: unset or `off` (the default) turns limits off. */
export const RateLimitConfig = variable("RATE_LIMIT", (text) =>
  Either.fromNullable(
    parsePolicy(text),
    () => "must be off, or N/second, N/minute or N/hour with N a positive integer (e.g. 100/minute)"
  )).pipe(Config.withDefault(Option.none<Policy>()))

/** `RateLimit`'s value: `remaining` requests left, all of the quota back in `seconds`. */
const limitField = (remaining: number, seconds: number): string => `"default";r=${Math.max(0, remaining)};t=${seconds}`

/** The counters of the backend in use: PostgreSQL's shared ones for PostgreSQL, else the process's memory. */
const storeFor = Effect.map(SqlClient.SqlClient, (sql) =>
  sql.onDialectOrElse({
    pg: () => Layer.succeed(RateLimiter.RateLimiterStore, makePostgresStore(sql)),
    orElse: () => RateLimiter.layerStoreMemory
  }))

/** Whole seconds, rounded up: a client that waits this long finds the quota back. */
const secondsUntil = (duration: Duration.Duration) => Math.max(0, Math.ceil(Duration.toMillis(duration) / 1000))

export class RateLimits extends Effect.Service<RateLimits>()("RateLimit/RateLimits", {
  effect: Effect.gen(function*() {
    const policy = yield* RateLimitConfig
    if (Option.isNone(policy)) {
      return {
        consume: <A>(_keyId: string, value: A): Effect.Effect<A, RateLimited | Unavailable> => Effect.succeed(value)
      }
    }
    const limiter = yield* Effect.provide(RateLimiter.make, yield* storeFor)
    const { limit, windowSeconds } = policy.value
    const options = {
      limit,
      window: Duration.seconds(windowSeconds),
      algorithm: "fixed-window",
      onExceeded: "fail"
    } as const
    const policyHeader = `"default";q=${limit};w=${windowSeconds}`
    return {
      /**
       * Counts one request of this API key, then succeeds with `value`: 429 past the quota, 503 when the shared
       * counters cannot be reached.
       */
      consume: <A>(keyId: string, value: A) =>
        Effect.matchEffect(limiter.consume({ ...options, key: keyId }), {
          onSuccess: (result) =>
            Effect.as(
              addResponseHeaders({
                "ratelimit-policy": policyHeader,
                ratelimit: limitField(result.remaining, secondsUntil(result.resetAfter))
              }),
              value
            ),
          onFailure: (error): Effect.Effect<A, RateLimited | Unavailable> => {
            if (error.reason !== "Exceeded") return answerUnavailable("rate-limit store failure", error)
            // At least a second: `Retry-After: 0` would invite the same request at once.
            const wait = Math.max(1, secondsUntil(error.retryAfter))
            return Effect.zipRight(
              addResponseHeaders({
                "ratelimit-policy": policyHeader,
                ratelimit: limitField(0, wait),
                "retry-after": String(wait)
              }),
              Effect.fail(rateLimited(wait))
            )
          }
        })
    }
  })
}) {}
