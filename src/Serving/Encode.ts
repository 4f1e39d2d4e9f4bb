/**
 * A success's JSON text as its schema encodes it: always `Schema.encodeEither`'s output, never the value as the handler
 * made it (a field the schema does not name never reaches a client; a value it refuses is the refusal). For the schemas
 * whose encoding is a check and a copy — structs of primitives, literals, refinements and arrays of them, without
 * transformations or parse options of their own, decided once from the schema at start-up — the check and copy run
 * here, compiled from the schema, at a small part of the cost; any value they do not accept goes to the schema's own
 * encoder, whose answer stands. `test/Encode.test.ts` searches for a value on which the two differ.
 */
import { Either, type ParseResult, Schema } from "effect"
import { compileCopy, REFUSED } from "../SchemaCopy.js"

export { compileCopy }

/** The success's JSON text, or why its schema refuses the value. */
export const makeEncodeJson = (schema: Schema.Schema.Any) => {
  const encode = Schema.encodeEither(schema as Schema.Schema<unknown, unknown>)
  const viaSchema = (value: unknown): Either.Either<string, ParseResult.ParseError> =>
    Either.map(encode(value), (encoded) => JSON.stringify(encoded))
  const copy = compileCopy(schema.ast)
  if (copy === undefined) return viaSchema
  return (value: unknown): Either.Either<string, ParseResult.ParseError> => {
    const copied = copy(value)
    return copied === REFUSED ? viaSchema(value) : Either.right(JSON.stringify(copied))
  }
}
