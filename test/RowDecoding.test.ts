/**
 * Rows are decoded by their statement's schema; the rows a check of the schema's AST passes are used as they are. The
 * check answers as decoding does, for rows near and across every bound of a pet (searched), and for the named cases.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either, FastCheck as fc, Schema } from "effect"
import { rowsDecoder } from "../src/Database/Statement.js"
import { NAME_MAX_LENGTH, Pet } from "../src/Domain/Pet.js"

const NUM_RUNS = Number(process.env.PROPERTY_RUNS ?? 500)
const decodeOne = Schema.decodeUnknownEither(Pet)
const decodeRows = rowsDecoder(Pet, "pets (SELECT)")

/** What `rowsDecoder` makes of one row: the row decoded, or the defect's message. */
const outcome = (row: unknown) => {
  try {
    return Either.right(decodeRows([row])[0])
  } catch (error) {
    return Either.left((error as Error).message)
  }
}

const number = fc.oneof(
  fc.integer({ min: -3, max: 3 }),
  fc.constantFrom(Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER + 1, 1.5, Number.NaN, -0),
  fc.double(),
  fc.constantFrom("1", null, undefined)
)
const name = fc.oneof(
  fc.string({ minLength: 0, maxLength: 4 }),
  fc.constantFrom(" Rex", "Rex ", "", "x".repeat(NAME_MAX_LENGTH), "x".repeat(NAME_MAX_LENGTH + 1), "😀".repeat(200)),
  fc.constantFrom(1, null)
)
const status = fc.oneof(fc.constantFrom("available", "pending", "sold", "lost", "", null), fc.string())
const row = fc.oneof(
  fc.record({ id: number, name, categoryId: number, status }),
  fc.record({ id: number, name, categoryId: number }),
  fc.constantFrom(null, "row", 1, [])
)

describe("Row decoding", () => {
  it.prop("a row passes exactly when it decodes, and as it decodes", [row], ([candidate]) => {
    const decoded = decodeOne(candidate)
    const got = outcome(candidate)
    expect(Either.isRight(got)).toBe(Either.isRight(decoded))
    if (Either.isRight(got) && Either.isRight(decoded)) expect(got.right).toEqual(decoded.right)
    if (Either.isLeft(got)) expect(got.left).toMatch(/^A row of pets \(SELECT\) does not match its schema: /)
  }, { fastCheck: { numRuns: NUM_RUNS } })

  it("a row of a negative category, a name too long, a status not listed, does not decode", () => {
    const rex = { id: 1, name: "Rex", categoryId: 1, status: "available" }
    expect(Either.isRight(outcome(rex))).toBe(true)
    for (
      const refused of [
        { ...rex, categoryId: -1 },
        { ...rex, name: "x".repeat(NAME_MAX_LENGTH + 1) },
        { ...rex, status: "lost" },
        { ...rex, name: " Rex" }
      ]
    ) expect(Either.isLeft(outcome(refused))).toBe(true)
  })
})
