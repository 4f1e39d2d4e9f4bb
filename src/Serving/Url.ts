/**
 * The parts of a request URL the server reads on every request, without building a `URL`.
 */

/** Where the request target (path and query) starts in a request URL, absolute or not. */
export const targetStart = (url: string): number => {
  if (url.charCodeAt(0) === 47) return 0
  const start = url.indexOf("/", url.indexOf("://") + 3)
  return start === -1 ? url.length : start
}

/** The path of a request URL (absolute or not), without its query: no URL parsing on every request. */
export const pathOf = (url: string): string => {
  const start = targetStart(url)
  if (start === url.length) return "/"
  const query = url.indexOf("?", start)
  return query === -1 ? url.slice(start) : url.slice(start, query)
}

/**
 * A query's name or value as the platform's router reads it: `+` is a space, then percent-decoded, or kept as it is
 * when it cannot be (an invalid escape, bytes that are not UTF-8).
 */
const queryText = (text: string) => {
  const spaced = text.includes("+") ? text.replaceAll("+", " ") : text
  if (!spaced.includes("%")) return spaced
  try {
    return decodeURIComponent(spaced) || spaced
  } catch {
    return spaced
  }
}

/**
 * The query of a request URL, each name with its value or, when repeated, its values, read as the platform's router
 * reads it (the `ParsedSearchParams` HttpApi decodes): linear in its length.
 */
export const queryOf = (url: string): Record<string, string | Array<string>> => {
  const at = url.indexOf("?")
  if (at === -1) return {}
  // Read into an object without a prototype, as the platform's `UrlParams.toRecord` reads one: a parameter named
  // `constructor` or `__proto__` is a parameter like any other.
  const out: Record<string, string | Array<string>> = Object.create(null)
  for (const pair of url.slice(at + 1).split("&")) {
    if (pair.length === 0) continue
    const equals = pair.indexOf("=")
    const name = queryText(equals === -1 ? pair : pair.slice(0, equals))
    const value = equals === -1 ? "" : queryText(pair.slice(equals + 1))
    const previous = out[name]
    if (previous === undefined) out[name] = value
    else if (typeof previous === "string") out[name] = [previous, value]
    else previous.push(value)
  }
  return { ...out }
}
