/**
 * The one route table of the server: every path it serves (the API's, from its declaration, and the server's own), the
 * methods each answers, and the one rule that matches a request's path against them. Bun's native routes, the request
 * pipeline, the 404/405 answers, CORS and the HttpApi app's own checks all read this table.
 *
 * The matching rule: a path matches a route when it is spelled exactly as declared, segment for segment, with at most
 * one trailing slash (`/v1/pets/` is `/v1/pets`). A parameter (`:petId`) takes one non-empty segment, as sent (its
 * percent-encoding is undone by the decoder, so `/v1/pets/%31` is pet 1, and `/v1/pets/1;x` is a petId that does not
 * decode). Nothing else matches: no other case, no doubled slash, no `;` parameters on a fixed segment.
 */

/** A path's segments after its leading slash: `/v1/pets/5` is `["", "v1", "pets", "5"]`, read from index 1. */
const segmentsOf = (path: string) => path.split("/")

/**
 * The params of a path spelled as `declared` (its segments), still percent-encoded; undefined when it is not. Nothing
 * is made for a path that does not match.
 */
const paramsOf = (declared: ReadonlyArray<string>, segments: ReadonlyArray<string>) => {
  if (segments.length !== declared.length) return undefined
  for (let i = 1; i < declared.length; i++) {
    if (declared[i].charCodeAt(0) !== 58 ? segments[i] !== declared[i] : segments[i] === "") return undefined
  }
  const params: Record<string, string> = {}
  for (let i = 1; i < declared.length; i++) {
    if (declared[i].charCodeAt(0) === 58) params[declared[i].slice(1)] = segments[i]
  }
  return params
}

/** Builds the table from (method, path, target) triples, in declaration order. */
export const makeRouteTable = <A>(
  routes: Iterable<{ readonly method: string; readonly path: string; readonly target: A }>
) => {
  const byPath = new Map<string, Map<string, A>>()
  for (const { method, path, target } of routes) {
    const targets = byPath.get(path) ?? byPath.set(path, new Map()).get(path)!
    if (!targets.has(method)) targets.set(method, target)
  }
  const entries = [...byPath].map(([path, targets]) => {
    // HEAD is served as GET where it has no target of its own.
    if (targets.has("GET") && !targets.has("HEAD")) targets.set("HEAD", targets.get("GET")!)
    // The path as declared (`/v1/pets/:petId`), the methods it answers, what serves each.
    return {
      path,
      methods: [...targets.keys()],
      targets: targets as ReadonlyMap<string, A>,
      segments: segmentsOf(path)
    }
  })
  const exact = new Map(entries.filter((entry) => !entry.path.includes("/:")).map((entry) => [entry.path, entry]))
  // Only a path with a parameter can match a path it is not spelled as.
  const withParams = entries.filter((entry) => entry.path.includes("/:"))

  /**
   * The route that serves `method` at a path, with its path parameters: the exact route, else the first route with
   * parameters that has the method (as the library's router, whose routes are per method: `DELETE /v1/pets/changes` is
   * the parameter route's when only it has a DELETE); when none has it, the first that matches. `methods` and `targets`
   * are those of every route the path matches (a 405's `Allow`, a preflight's).
   */
  const match = (path: string, method: string) => {
    const trimmed = path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path
    const found = exact.get(trimmed)
    if (found !== undefined && found.targets.has(method)) {
      return { entry: found, params: {} as Record<string, string>, methods: found.methods, targets: found.targets }
    }
    const segments = segmentsOf(trimmed)
    const matched: Array<{ readonly entry: (typeof entries)[number]; readonly params: Record<string, string> }> =
      found === undefined ? [] : [{ entry: found, params: {} }]
    for (const entry of withParams) {
      const params = paramsOf(entry.segments, segments)
      if (params === undefined) continue
      if (matched.length === 0 && entry.targets.has(method)) {
        return { entry, params, methods: entry.methods, targets: entry.targets }
      }
      matched.push({ entry, params })
    }
    if (matched.length === 0) return undefined
    const serving = matched.find(({ entry }) => entry.targets.has(method)) ?? matched[0]
    const targets = new Map<string, A>()
    for (const { entry } of matched) {
      for (const [name, target] of entry.targets) if (!targets.has(name)) targets.set(name, target)
    }
    return { ...serving, methods: [...targets.keys()], targets: targets as ReadonlyMap<string, A> }
  }

  /** The paths as Bun's `routes` spell them, with and without the trailing slash. */
  const bunPaths = entries.flatMap((entry) => [entry.path, `${entry.path}/`])
  return { match, bunPaths }
}

export type RouteTable<A> = ReturnType<typeof makeRouteTable<A>>
