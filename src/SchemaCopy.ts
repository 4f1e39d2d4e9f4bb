/**
 * A schema's check and copy, compiled from its AST once: for the schemas whose encoding and decoding are a check and a
 * copy (structs of primitives, literals, refinements and arrays of them, without transformations or parse options of
 * their own), the value the schema's own encoder or decoder would give, or `REFUSED`; undefined for any other schema.
 * It is ~4x cheaper than `Schema.encodeEither`/`decodeUnknownEither` (a pet ~1 µs against ~5 µs); a value it refuses
 * goes to the schema itself, whose answer stands. Served answers (`Serving/Encode.ts`) and database rows
 * (`Database/Statement.ts`) use it; `test/Encode.test.ts` and `test/RowDecoding.test.ts` search for a difference.
 */
import { Option, Predicate } from "effect"
import * as AST from "effect/SchemaAST"

/** What a compiled check returns for a value it does not accept. */
export const REFUSED: unique symbol = Symbol("SchemaCopy/refused")

/** A value's encoded form, built as `Schema.encodeEither` builds it, or `REFUSED`. */
export type Copy = (value: unknown) => unknown

const primitive = (is: (value: unknown) => boolean): Copy => (value) => is(value) ? value : REFUSED

/** The compiled check and copy of `ast`'s encoding, or undefined when its encoding is more than that. */
export const compileCopy = (ast: AST.AST): Copy | undefined => {
  if (Option.isSome(AST.getParseOptionsAnnotation(ast))) return undefined
  switch (ast._tag) {
    case "StringKeyword":
      return primitive(Predicate.isString)
    case "NumberKeyword":
      return primitive(Predicate.isNumber)
    case "BooleanKeyword":
      return primitive(Predicate.isBoolean)
    case "Literal":
      return primitive((value) => value === ast.literal)
    case "Union": {
      if (!ast.types.every((member) => member._tag === "Literal")) return undefined
      const literals = new Set(ast.types.map((member) => (member as AST.Literal).literal))
      return primitive((value) => literals.has(value as AST.LiteralValue))
    }
    case "Refinement": {
      // A chain of refinements is checked in one step: the base's check, then each filter from the innermost out.
      const refinements: Array<AST.Refinement> = []
      let base: AST.AST = ast
      for (; base._tag === "Refinement"; base = base.from) {
        if (Option.isSome(AST.getParseOptionsAnnotation(base))) return undefined
        refinements.unshift(base)
      }
      const from = compileCopy(base)
      if (from === undefined) return undefined
      return (value) => {
        const copied = from(value)
        if (copied === REFUSED) return REFUSED
        for (const refinement of refinements) {
          if (Option.isSome(refinement.filter(copied, AST.defaultParseOption, refinement))) return REFUSED
        }
        return copied
      }
    }
    case "TupleType": {
      if (ast.elements.length > 0 || ast.rest.length !== 1) return undefined
      const item = compileCopy(ast.rest[0].type)
      if (item === undefined) return undefined
      return (value) => {
        if (!Array.isArray(value)) return REFUSED
        const out: Array<unknown> = new Array(value.length)
        for (let i = 0; i < value.length; i++) if ((out[i] = item(value[i])) === REFUSED) return REFUSED
        return out
      }
    }
    case "TypeLiteral": {
      if (ast.indexSignatures.length > 0 || ast.propertySignatures.length === 0) return undefined
      const fields: Array<{ readonly name: string; readonly optional: boolean; readonly copy: Copy }> = []
      for (const property of ast.propertySignatures) {
        const copy = compileCopy(property.type)
        if (copy === undefined || typeof property.name !== "string") return undefined
        fields.push({ name: property.name, optional: property.isOptional, copy })
      }
      return (value) => {
        if (!Predicate.isRecord(value)) return REFUSED
        // The schema's fields, in its order, and nothing else: what the encoder's output has.
        const out: Record<string, unknown> = {}
        for (const { copy, name, optional } of fields) {
          if (optional && !Object.prototype.hasOwnProperty.call(value, name)) continue
          if ((out[name] = copy(value[name])) === REFUSED) return REFUSED
        }
        return out
      }
    }
    default:
      return undefined
  }
}
