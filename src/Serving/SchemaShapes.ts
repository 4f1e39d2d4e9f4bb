/**
 * What the engine reads of a schema's shape to serve it as `HttpApiBuilder` does: whether encoding changes a value,
 * whether a query is made of single strings, which headers a struct declares.
 */
import type * as AST from "effect/SchemaAST"

/** Whether encoding a value of this schema changes it (else the value is its own JSON form). */
export const transforms = (ast: AST.AST): boolean => {
  switch (ast._tag) {
    case "Transformation":
    case "Declaration":
    case "Suspend":
      return true
    case "Refinement":
      return transforms(ast.from)
    case "TypeLiteral":
      return ast.propertySignatures.some((p) => transforms(p.type)) ||
        ast.indexSignatures.some((i) => transforms(i.type))
    case "TupleType":
      return ast.elements.some((e) => transforms(e.type)) || ast.rest.some((r) => transforms(r.type))
    case "Union":
      return ast.types.some(transforms)
    default:
      return false
  }
}

/** Whether every field of a query schema is read from one string (HttpApi would wrap a single value for an array). */
export const singleStringFields = (ast: AST.AST): boolean => {
  switch (ast._tag) {
    case "Transformation":
      return singleStringFields(ast.from)
    case "Refinement":
      return singleStringFields(ast.from)
    case "TypeLiteral":
      return ast.propertySignatures.every((p) => !isArrayLike(p.type)) && ast.indexSignatures.length === 0
    default:
      return false
  }
}
const isArrayLike = (ast: AST.AST): boolean => {
  switch (ast._tag) {
    case "TupleType":
      return true
    case "Union":
      return ast.types.some(isArrayLike)
    case "Refinement":
    case "Transformation":
      return isArrayLike(ast.from)
    default:
      return false
  }
}

/** What a headers schema reads of its input: a struct of named headers (the only form HttpApi's headers take). */
export const headersStructOf = (ast: AST.AST): AST.TypeLiteral | undefined => {
  while (ast._tag === "Transformation" || ast._tag === "Refinement") ast = ast.from
  return ast._tag === "TypeLiteral" && ast.indexSignatures.length === 0 ? ast : undefined
}

/** The names of the headers a headers schema declares, lower case. */
export const headerNamesOf = (ast: AST.AST): ReadonlyArray<string> =>
  headersStructOf(ast)?.propertySignatures.map((p) => String(p.name).toLowerCase()) ?? []
