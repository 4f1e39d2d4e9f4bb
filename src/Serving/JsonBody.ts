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

const LITERAL = /true|false|null/y
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y
const ESCAPE = /\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})/y

/** A character as a message shows it: itself in quotes, or its code point when it cannot be seen. */
const shown = (c: string) =>
  c.charCodeAt(0) < 0x20 || c === "\u007f"
    ? `U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}`
    : JSON.stringify(c)

/**
 * Why and where `JSON.parse` refuses `text` (its own message says neither): the first character that cannot be JSON
 * (RFC 8259), by line and column, both from 1, columns in UTF-16 code units. One pass, with no recursion: the depth of
 * the text is not bounded yet.
 */
export const syntaxProblem = (text: string): string => {
  if (text.trim() === "") return "the body is empty"
  const problem = firstSyntaxError(text)
  if (problem === undefined) return "it is not valid JSON"
  const before = text.slice(0, problem.at)
  const line = before.split("\n").length
  const column = problem.at - before.lastIndexOf("\n")
  return `${problem.why}, at line ${line}, column ${column}`
}

type Next = "value" | "value or ]" | "name" | "name or }" | "after value" | ":"

const firstSyntaxError = (text: string): { readonly at: number; readonly why: string } | undefined => {
  /** The open arrays (`]`) and objects (`}`), innermost last. */
  const open: Array<"]" | "}"> = []
  /** What comes next: a value, a member's name, or what follows a value or a name. */
  let next: Next = "value" as Next
  let i = 0
  const matchAt = (pattern: RegExp) => {
    pattern.lastIndex = i
    return pattern.test(text) ? pattern.lastIndex : undefined
  }
  /** A string from its opening quote; the offset after its closing one, or the problem. */
  const string = (): number | { at: number; why: string } => {
    for (let j = i + 1; j < text.length; j++) {
      const c = text[j]
      if (c === "\"") return j + 1
      if (c.charCodeAt(0) < 0x20) return { at: j, why: `the control character ${shown(c)} must be escaped in a string` }
      if (c === "\\") {
        ESCAPE.lastIndex = j
        if (!ESCAPE.test(text)) return { at: j, why: "a backslash starts no escape JSON has" }
        j = ESCAPE.lastIndex - 1
      }
    }
    return { at: text.length, why: "the body ends inside a string" }
  }
  const expected: Record<Next, string> = {
    "value": "a value",
    "value or ]": "a value or \"]\"",
    "name": "a member name in double quotes",
    "name or }": "a member name in double quotes or \"}\"",
    "after value": "",
    ":": "\":\" after the member name"
  }
  for (;;) {
    while (i < text.length && " \t\n\r".includes(text[i])) i++
    const close = open[open.length - 1]
    if (next === "after value" && close === undefined) {
      return i === text.length ? undefined : { at: i, why: `${shown(text[i])} follows the end of the JSON value` }
    }
    const wanted = next === "after value" ? `"," or ${JSON.stringify(close)}` : expected[next]
    if (i === text.length) {
      return { at: i, why: `the body ends where ${wanted} is expected` }
    }
    const c = text[i]
    const unexpected = { at: i, why: `${shown(c)} where ${wanted} is expected` }
    if (next === "after value" || next === ":") {
      if (next === ":" && c === ":") next = "value"
      else if (next === "after value" && c === ",") next = close === "}" ? "name" : "value"
      else if (next === "after value" && c === close) open.pop()
      else return unexpected
      i++
    } else if ((next === "value or ]" && c === "]") || (next === "name or }" && c === "}")) {
      open.pop()
      next = "after value"
      i++
    } else if (next === "name" || next === "name or }") {
      if (c !== "\"") return unexpected
      const end = string()
      if (typeof end !== "number") return end
      next = ":"
      i = end
    } else if (c === "{" || c === "[") {
      open.push(c === "{" ? "}" : "]")
      next = c === "{" ? "name or }" : "value or ]"
      i++
    } else {
      const end = c === "\"" ? string() : matchAt(NUMBER) ?? matchAt(LITERAL)
      if (end === undefined) return unexpected
      if (typeof end !== "number") return end
      next = "after value"
      i = end
    }
  }
}
