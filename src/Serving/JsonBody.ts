/** What a JSON request body must be before the API decodes it, beyond what `JSON.parse` checks. */

/**
 * The deepest nesting of arrays and objects a body may have. A pet is one flat object; a deeper value can only be
 * ignored or refused, and describing one of thousands of levels in an error message exhausts the stack.
 */
export const MAX_JSON_DEPTH = 32

const MAX_NAME_SHOWN = 40

/**
 * Why a body that `JSON.parse` accepts is still refused, or undefined when it is acceptable: nesting deeper than
 * `MAX_JSON_DEPTH`, or an object with the same member name twice (I-JSON, RFC 7493 §2.3: which of the two counts is up
 * to each parser, so a proxy and the service could read different pets). One pass over the text, which must be JSON.
 */
export const jsonProblem = (text: string): string | undefined => {
  // The member names seen so far in each open object; undefined for an array.
  const open: Array<Set<string> | undefined> = []
  let expectName = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      const start = i
      let escaped = false
      for (i++; text.charCodeAt(i) !== 0x22; i++) {
        if (text.charCodeAt(i) === 0x5c) {
          escaped = true
          i++ // the escaped character cannot end the string
        }
      }
      if (!expectName) continue
      expectName = false
      const name: string = escaped ? JSON.parse(text.slice(start, i + 1)) : text.slice(start + 1, i)
      const names = open[open.length - 1]!
      if (names.has(name)) {
        const shown = name.length > MAX_NAME_SHOWN ? `${name.slice(0, MAX_NAME_SHOWN)}…` : name
        return `an object has the member ${JSON.stringify(shown)} more than once`
      }
      names.add(name)
    } else if (c === 0x7b || c === 0x5b) {
      if (open.length === MAX_JSON_DEPTH) return `it is nested more than ${MAX_JSON_DEPTH} levels deep`
      open.push(c === 0x7b ? new Set() : undefined)
      expectName = c === 0x7b
    } else if (c === 0x7d || c === 0x5d) {
      open.pop()
    } else if (c === 0x2c) {
      expectName = open[open.length - 1] !== undefined
    }
  }
  return undefined
}

/**
 * `application/json`, the one type the API declares, in UTF-8 (RFC 8259 §8.1). Not another charset, not a `+json`
 * type (whose meaning, a merge patch say, is not a new pet), and not a body without a Content-Type, which RFC 9110 §8.3
 * lets a recipient take for application/octet-stream.
 */
export const isJsonMediaType = (contentType: string | null) => {
  if (contentType === null) return false
  const [type, ...parameters] = contentType.split(";").map((part) => part.trim().toLowerCase())
  const charset = parameters.find((parameter) => parameter.startsWith("charset="))?.slice(8).replace(/^"(.*)"$/, "$1")
  return type === "application/json" && (charset === undefined || charset === "utf-8" || charset === "utf8")
}
