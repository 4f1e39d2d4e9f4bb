/**
 * What a JSON request body must be before the API decodes it, beyond what `JSON.parse` checks.
 */

/**
 * The deepest nesting of arrays and objects a body may have. A pet is one flat object; a deeper value can only be
 * ignored or refused, and describing one of thousands of levels in an error message exhausts the stack.
 */
export const MAX_JSON_DEPTH = 32

/** Why a body that `JSON.parse` accepts is still refused, or undefined when it is acceptable. */
export const jsonProblem = (text: string): string | undefined => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++ // the escaped character cannot end the string
      else if (c === 0x22) inString = false
    } else if (c === 0x22) {
      inString = true
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > MAX_JSON_DEPTH) return `it is nested more than ${MAX_JSON_DEPTH} levels deep`
    } else if (c === 0x7d || c === 0x5d) {
      depth--
    }
  }
  return undefined
}
