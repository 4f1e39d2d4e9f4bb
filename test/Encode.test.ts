/**
 * The compiled check and copy of `src/Serving/Encode.ts` answers what the schema's own encoder answers, on every value
 * a search finds: valid values of the schema, the same with fields the schema does not name, and anything at all.
 * `PROPERTY_RUNS` runs more.
 */
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Either, FastCheck as fc, Schema } from "effect"
import { Pet, Pets } from "../src/Domain/Pet.js"
import { compileCopy, makeEncodeJson } from "../src/Serving/Encode.js"

const numRuns = Number(process.env.PROPERTY_RUNS ?? 200)

const Status = Schema.Literal("a", "b", 3, null, true)
const schemas = {
  Pet,
  Pets,
  nested: Schema.Struct({
    id: Schema.Int.pipe(Schema.positive()),
    tags: Schema.Array(Schema.String.pipe(Schema.maxLength(3))),
    inner: Schema.Struct({ on: Schema.Boolean, status: Status }),
    note: Schema.optionalWith(Schema.String, { exact: true })
  }),
  filteredStruct: Schema.Struct({ low: Schema.Number, high: Schema.Number }).pipe(
    Schema.filter(({ high, low }) => low <= high)
  )
} as const

/** A value of the schema, the same with fields it does not name, or anything. */
const candidates = (schema: Schema.Schema.Any) =>
  fc.oneof(
    Arbitrary.make(schema as Schema.Schema<unknown>),
    fc.tuple(Arbitrary.make(schema as Schema.Schema<unknown>), fc.dictionary(fc.string(), fc.anything())).map((
      [value, extra]
    ) =>
      typeof value === "object" && value !== null && !Array.isArray(value) ? { ...extra, ...value, ...extra } : value
    ),
    fc.anything()
  )

describe("a success's JSON, compiled from its schema", () => {
  for (const [name, schema] of Object.entries(schemas)) {
    it(`${name}: the compiled copy is used, and answers what the schema's encoder answers`, () => {
      expect(compileCopy(schema.ast)).toBeDefined()
      const encodeJson = makeEncodeJson(schema)
      const viaSchema = Schema.encodeEither(schema as Schema.Schema<unknown, unknown>)
      fc.assert(
        fc.property(candidates(schema), (value) => {
          const expected = Either.map(viaSchema(value), (encoded) => JSON.stringify(encoded))
          const seen = encodeJson(value)
          expect(Either.isRight(seen)).toBe(Either.isRight(expected))
          if (Either.isRight(seen) && Either.isRight(expected)) expect(seen.right).toBe(expected.right)
        }),
        { numRuns }
      )
    })
  }

  it("a schema whose encoding transforms, or that sets its own parse options, is encoded by the schema alone", () => {
    expect(compileCopy(Schema.Struct({ at: Schema.Date }).ast)).toBeUndefined()
    expect(compileCopy(Schema.Struct({ n: Schema.NumberFromString }).ast)).toBeUndefined()
    expect(compileCopy(Schema.Struct({ n: Schema.optional(Schema.Number) }).ast)).toBeUndefined()
    expect(
      compileCopy(
        Schema.Struct({ n: Schema.Number }).annotations({ parseOptions: { onExcessProperty: "preserve" } }).ast
      )
    ).toBeUndefined()
  })

  it("a value whose fields come in another order, with one more, is encoded in the schema's order without it", () => {
    expect(makeEncodeJson(Pet)({ status: "sold", extra: 1, categoryId: 2, name: "Tom", id: 2 })).toEqual(
      Either.right("{\"id\":2,\"name\":\"Tom\",\"categoryId\":2,\"status\":\"sold\"}")
    )
  })
})
