/**
 * The quota every API key gets (`RATE_LIMIT`) and how answers state it (draft-ietf-httpapi-ratelimit-headers-10):
 *
 *     RateLimit-Policy: "default";q=100;w=60      the policy: q requests per window of w seconds
 *     RateLimit: "default";r=42;t=17              what is left of it: r requests, all of it back in t seconds
 *
 * Both fields are Structured Field Lists (RFC 9651) of one item, the policy's name as a String, with Integer parameters.
 */
import { Config, Either, Option } from "effect"
import { variable } from "../Config.js"

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

/** `RateLimit-Policy`'s value. */
export const policyField = (policy: Policy): string => `"default";q=${policy.limit};w=${policy.windowSeconds}`

/** `RateLimit`'s value: `remaining` requests left, all of the quota back in `seconds`. */
export const limitField = (remaining: number, seconds: number): string =>
  `"default";r=${Math.max(0, remaining)};t=${seconds}`
