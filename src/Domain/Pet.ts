/**
 * The catalogue's concepts, declared once: the API, the repository and the tests all use these schemas. Every schema
 * of the OpenAPI document carries an example the service accepts or answers; the docs page's requests send them.
 */
import { ParseResult, Schema } from "effect"

/** The largest integer a JSON number carries exactly (2^53 - 1). */
export const MAX_SAFE_ID = Number.MAX_SAFE_INTEGER

/** How the document shows a positive 64-bit id below 2^53. */
const int64 = (description: string, examples?: ReadonlyArray<number>) => ({
  type: "integer",
  format: "int64",
  minimum: 1,
  maximum: MAX_SAFE_ID,
  description,
  ...(examples === undefined ? {} : { examples })
})

export const PetStatus = Schema.Literal("available", "pending", "sold").annotations({
  identifier: "PetStatus",
  message: () => ({ message: "must be one of available, pending, sold", override: true }),
  description: "Availability status of an animal.",
  examples: ["available"]
})
export type PetStatus = typeof PetStatus.Type

const PositiveId = Schema.Int.pipe(Schema.greaterThanOrEqualTo(1), Schema.lessThanOrEqualTo(MAX_SAFE_ID))

/** Identifier assigned by the service: a positive integer below 2^53. */
export const PetId = PositiveId.pipe(Schema.brand("PetId")).annotations({
  jsonSchema: int64("Unique identifier, assigned by the service on creation.", [1])
})
export type PetId = typeof PetId.Type

export const CategoryId = PositiveId.annotations({
  message: () => ({ message: `must be a positive integer no larger than ${MAX_SAFE_ID}`, override: true }),
  jsonSchema: int64("Identifier of the category the animal belongs to (a positive integer below 2^53).", [1])
})

export const NAME_MAX_LENGTH = 200

/** The number of characters (Unicode code points) of a text, as JSON Schema's `maxLength` counts them. */
const characters = (text: string): number => {
  let count = 0
  for (const _ of text) count++
  return count
}

/**
 * The stored name: trimmed, 1 to 200 characters. Characters are code points, as the OpenAPI document's `maxLength`
 * means, not UTF-16 units: 200 emoji are a valid name.
 */
export const PetName = Schema.Trimmed.pipe(
  Schema.minLength(1),
  // A text has at most as many characters as UTF-16 units: only a longer one is counted.
  Schema.filter((name) => name.length <= NAME_MAX_LENGTH || characters(name) <= NAME_MAX_LENGTH, {
    message: () => `must be at most ${NAME_MAX_LENGTH} characters`
  })
).annotations({
  jsonSchema: {
    type: "string",
    minLength: 1,
    maxLength: NAME_MAX_LENGTH,
    description: "The animal's name.",
    examples: ["Rex"]
  }
})

/**
 * Control characters (C0, DEL, C1) and lone surrogates are not text: a lone surrogate cannot even be stored as UTF-8
 * (it would read back as U+FFFD, not as the name the 201 echoed). Refused on input only, so that rows stored before
 * this rule still read.
 */
const NOT_TEXT = /[\p{Cc}\p{Cs}]/u

/** A name as a client sends it: surrounding white space is trimmed, then 1 to 200 characters of text remain. */
export const PetNameInput = Schema.compose(
  Schema.Trim,
  PetName.pipe(Schema.filter((name) => !NOT_TEXT.test(name)))
).annotations({
  message: () => ({
    message:
      `must be a string of 1 to ${NAME_MAX_LENGTH} characters without control characters, surrounding white space not counted`,
    override: true
  }),
  jsonSchema: {
    type: "string",
    minLength: 1,
    maxLength: NAME_MAX_LENGTH,
    description:
      "The animal's name: 1 to 200 characters once surrounding white space is trimmed (it is stored trimmed), " +
      "without control characters.",
    examples: ["Rex"]
  }
})

export const DEFAULT_STATUS: PetStatus = "available"

const REX = { id: PetId.make(1), name: "Rex", categoryId: 1, status: "available" } as const
const TOM = { id: PetId.make(2), name: "Tom", categoryId: 2, status: "sold" } as const

/** The request body of createPet. `id` and unknown fields are ignored. */
export const NewPet = Schema.Struct({
  name: PetNameInput,
  categoryId: CategoryId,
  status: Schema.optionalWith(PetStatus, { default: () => DEFAULT_STATUS }).annotations({
    description: "Availability status; `available` when omitted.",
    default: DEFAULT_STATUS
  })
}).annotations({
  identifier: "NewPet",
  description: "An animal to add to the catalogue.",
  examples: [{ name: REX.name, categoryId: REX.categoryId, status: REX.status }]
})
export type NewPet = typeof NewPet.Type

export const Pet = Schema.Struct({
  id: PetId,
  name: PetName,
  categoryId: CategoryId,
  status: PetStatus
}).annotations({ identifier: "Pet", description: "An animal of the catalogue.", examples: [REX] })
export type Pet = typeof Pet.Type

export const Pets = Schema.Array(Pet).annotations({
  identifier: "Pets",
  description: "A page of animals, ordered by id.",
  examples: [[REX, TOM]]
})

export const LIMIT_MIN = 1
export const LIMIT_MAX = 100
export const LIMIT_DEFAULT = 20

const POSITIVE_DECIMAL = /^[1-9][0-9]{0,15}$/

/**
 * A positive decimal integer in a URL (no sign, no leading zeros, no exponent, no white space), read in one step: URL
 * parameters are decoded on every request.
 */
export const PositiveIntFromString = Schema.transformOrFail(Schema.String, Schema.Number, {
  strict: true,
  decode: (text, _, ast) => {
    if (!POSITIVE_DECIMAL.test(text)) {
      return ParseResult.fail(new ParseResult.Type(ast, text, "must be a positive integer"))
    }
    const value = Number(text)
    // Past 2^53 - 1 the number would already be rounded: refused here, with the bound, not as "not an integer".
    return Number.isSafeInteger(value)
      ? ParseResult.succeed(value)
      : ParseResult.fail(new ParseResult.Type(ast, text, `must be a positive integer no larger than ${MAX_SAFE_ID}`))
  },
  encode: (value) => ParseResult.succeed(String(value))
})

/** A decimal integer from 0 in a URL (no sign, no leading zeros): the bounds are the caller's. */
const DecimalFromString = Schema.transformOrFail(Schema.String, Schema.Number, {
  strict: true,
  decode: (text, _, ast) =>
    /^(0|[1-9][0-9]{0,15})$/.test(text)
      ? ParseResult.succeed(Number(text))
      : ParseResult.fail(new ParseResult.Type(ast, text, "must be an integer")),
  encode: (value) => ParseResult.succeed(String(value))
})

/**
 * A query parameter that is an integer from `min` to `max` (`fallback` when absent, as the handler applies it): one
 * message for every value refused, below and above alike.
 */
export const IntBetweenFromString = (min: number, max: number, fallback: number, description: string) =>
  DecimalFromString.pipe(Schema.compose(Schema.Int.pipe(Schema.between(min, max)))).annotations({
    message: () => ({ message: `must be an integer from ${min} to ${max}`, override: true }),
    jsonSchema: {
      type: "integer",
      minimum: min,
      maximum: max,
      default: fallback,
      description: `${description} (${min} to ${max}, default ${fallback}).`,
      examples: [fallback]
    }
  })

/** A page's size: `0` and `101` refused alike. */
export const Limit = IntBetweenFromString(LIMIT_MIN, LIMIT_MAX, LIMIT_DEFAULT, "Maximum number of animals to return")

export const PetIdFromString = PositiveIntFromString.pipe(Schema.compose(PetId)).annotations({
  jsonSchema: int64("Identifier of the animal.", [1])
})

/** The query of listPets. Unknown parameters are ignored. */
export const ListPetsQuery = Schema.Struct({
  limit: Schema.optional(Limit),
  status: Schema.optional(PetStatus.annotations({ description: "Return only animals with this status." })),
  after: Schema.optional(PetIdFromString.annotations({
    jsonSchema: int64(
      "Keyset cursor: only animals whose id is greater than this one (the `Link: rel=\"next\"` header carries it)."
    )
  })),
  id: Schema.optional(PetIdFromString.annotations({
    jsonSchema: int64("Only the animal with this id: a page of it, or an empty one when no animal has it.")
  }))
})
export type ListPetsQuery = typeof ListPetsQuery.Type
