/**
 * The quota every API key gets (`RATE_LIMIT`) and how answers state it (draft-ietf-httpapi-ratelimit-headers-10):
 *
 *     RateLimit-Policy: "default";q=100;w=60      the policy: q requests per window of w seconds
 *     RateLimit: "default";r=42;t=17              what is left of it: r requests, all of it back in t seconds
 *
 * Both fields are Structured Field Lists (RFC 9651) of one item, the policy's name as a String, with Integer parameters.
 */
import { Config, Duration, Either, Option } from "effect"
import { variable } from "../Config.js"

export interface Policy {
  /** Requests per window (`q`). */
  readonly limit: number
  readonly window: Duration.Duration
  /** The window in seconds (`w`). */
  readonly windowSeconds: number
}

const UNITS = { second: 1, minute: 60, hour: 3600 } as const
const FORM = /^([1-9][0-9]{0,8})\/(second|minute|hour)$/

export const RATE_LIMIT_RULE =
  "must be off, or N/second, N/minute or N/hour with N a positive integer (e.g. 100/minute)"

/** The policy a `RATE_LIMIT` value names: `None` for `off`, `undefined` for a value that is not one of the forms. */
export const parsePolicy = (text: string): Option.Option<Policy> | undefined => {
  const value = text.trim().toLowerCase()
  if (value === "off" || value === "") return Option.none()
  const match = FORM.exec(value)
  if (match === null) return undefined
  const windowSeconds = UNITS[match[2] as keyof typeof UNITS]
  return Option.some({ limit: Number(match[1]), window: Duration.seconds(windowSeconds), windowSeconds })
}

/** `RATE_LIMIT`: unset or `off` (the default) turns limits off. */
export const RateLimitConfig: Config.Config<Option.Option<Policy>> = variable("RATE_LIMIT", (text) => {
  const policy = parsePolicy(text)
  return policy === undefined ? Either.left(RATE_LIMIT_RULE) : Either.right(policy)
}).pipe(Config.withDefault(Option.none()))

/** The policy's name in both fields. */
export const POLICY_NAME = "default"

/** `RateLimit-Policy`'s value. */
export const policyField = (policy: Policy): string => `"${POLICY_NAME}";q=${policy.limit};w=${policy.windowSeconds}`

/** Whole seconds, rounded up: a client that waits this long finds the quota back. */
export const secondsOf = (millis: number): number => Math.max(0, Math.ceil(millis / 1000))

/** `RateLimit`'s value: `remaining` requests left, all of the quota back in `resetSeconds`. */
export const limitField = (remaining: number, resetSeconds: number): string =>
  `"${POLICY_NAME}";r=${Math.max(0, remaining)};t=${resetSeconds}`
