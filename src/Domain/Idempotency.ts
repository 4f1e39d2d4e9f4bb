/**
 * The `Idempotency-Key` request header of createPet (draft-ietf-httpapi-idempotency-key-header-07). The draft makes it
 * a structured-field String (`"8e03978e"`); most SDKs send the bare value (`8e03978e`), so both are accepted and name
 * the same key: a value that starts with `"` is read by the grammar of RFC 9651 §3.3.3 and §3.1.2 (parameters, which
 * the draft defines none of, are ignored), any other as it stands. Written out here, so that the declarations need
 * nothing beyond effect and @effect/platform. Either way the key is 1 to 255 visible ASCII characters, no space.
 */
import { ParseResult, Schema } from "effect"

export const IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
const MAX_LENGTH = 255
const KEY = /^[\x21-\x7e]{1,255}$/

/** What a client is told when the header cannot be read (the 400 `invalid_header` message ends with it). */
export const IDEMPOTENCY_KEY_RULE =
  `must be 1 to ${MAX_LENGTH} visible ASCII characters without spaces, bare or as a quoted ` +
  `structured-field string ("…")`

// RFC 9651: an sf-string, and the bare items a parameter's value may be.
const SF_STRING = String.raw`"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*"`
const BARE_ITEM = [
  String.raw`-?[0-9]{1,15}(?:\.[0-9]{1,3})?`, // integer, decimal
  SF_STRING,
  String.raw`[A-Za-z*][!#$%&'*+\-.^_\x60|~0-9A-Za-z:/]*`, // token
  String.raw`:[A-Za-z0-9+/=]*:`, // byte sequence
  String.raw`\?[01]`, // boolean
  String.raw`@-?[0-9]{1,15}`, // date
  String.raw`%"(?:[\x20\x21\x23\x24\x26-\x7e]|%[0-9a-f]{2})*"` // display string
].join("|")
const PARAMETERS = String.raw`(?:; *[a-z*][a-z0-9_\-.*]*(?:=(?:${BARE_ITEM}))?)*`
/** An Item whose bare item is a String, with its parameters; the string's content is the first group. */
const SF_STRING_ITEM = new RegExp(`^ *(${SF_STRING})${PARAMETERS} *$`)

/** The quoted form as clients send it: no escapes, no parameters (the grammar above, short of both). */
const PLAIN_QUOTED_KEY = /^"([\x21\x23-\x5b\x5d-\x7e]{1,255})"$/

/** The key a header value names, if it names one. */
const idempotencyKeyOf = (text: string): string | undefined => {
  const plain = PLAIN_QUOTED_KEY.exec(text)
  if (plain !== null) return plain[1]
  const value = text.trim()
  let key = value
  if (value.startsWith("\"")) {
    const match = SF_STRING_ITEM.exec(value)
    if (match === null) return undefined
    key = match[1].slice(1, -1).replace(/\\(["\\])/g, "$1")
  }
  return KEY.test(key) ? key : undefined
}

/** The header's value decoded to the key itself; encoded as the draft's structured-field String. */
export const IdempotencyKey = Schema.transformOrFail(Schema.String, Schema.String, {
  strict: true,
  decode: (value, _, ast) => {
    const key = idempotencyKeyOf(value)
    return key === undefined
      ? ParseResult.fail(new ParseResult.Type(ast, value, IDEMPOTENCY_KEY_RULE))
      : ParseResult.succeed(key)
  },
  encode: (key) => ParseResult.succeed(`"${key.replace(/[\\"]/g, "\\$&")}"`)
}).annotations({
  identifier: "IdempotencyKey",
  message: () => ({ message: IDEMPOTENCY_KEY_RULE, override: true }),
  jsonSchema: {
    type: "string",
    minLength: 1,
    maxLength: MAX_LENGTH + 2,
    examples: ["\"8e03978e-40d5-43e8-bc93-6894a57f9324\"", "8e03978e-40d5-43e8-bc93-6894a57f9324"],
    description:
      "draft-ietf-httpapi-idempotency-key-header-07: a unique key for this request, as a structured-field string " +
      "(`\"…\"`) or bare; 1 to 255 visible ASCII characters, no space. A retry with the same key and the same body " +
      "is answered as the first request was (with `Idempotent-Replayed: true`) and adds nothing; with another body it " +
      "is 422 `idempotency_key_reused`; while the first is still being processed, 409 `idempotency_key_in_use`. Keys " +
      "are scoped to the API key and remembered for `IDEMPOTENCY_TTL` (24 hours by default)."
  }
})

/** createPet's request headers. HttpApi hands headers over with lower-case names. */
export const CreatePetHeaders = Schema.Struct({
  "idempotency-key": Schema.optional(IdempotencyKey)
})
export type CreatePetHeaders = typeof CreatePetHeaders.Type
