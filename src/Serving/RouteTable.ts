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

export interface RouteEntry<A> {
  /** As declared: `/v1/pets/:petId`. */
  readonly path: string
  /** The methods answered, HEAD included wherever GET is. */
  readonly methods: ReadonlyArray<string>
  /** What serves each method (HEAD served as GET when it has none of its own). */
  readonly targets: ReadonlyMap<string, A>
}

export interface Match<A> {
  readonly entry: RouteEntry<A>
  /** The raw (still percent-encoded) path parameters. */
  readonly params: Record<string, string>
}

export interface RouteTable<A> {
  readonly entries: ReadonlyArray<RouteEntry<A>>
  /** The route a path belongs to, whatever the method. */
  readonly match: (path: string) => Match<A> | undefined
  /** The paths as Bun's `routes` spell them (with and without the trailing slash), each with its entry. */
  readonly bunPaths: ReadonlyArray<readonly [string, RouteEntry<A>]>
}

const segmentsOf = (path: string) => path.split("/").slice(1)

/** Builds the table from (method, path, target) triples, in declaration order. */
export const makeRouteTable = <A>(
  routes: Iterable<{ readonly method: string; readonly path: string; readonly target: A }>
): RouteTable<A> => {
  const byPath = new Map<string, Map<string, A>>()
  for (const { method, path, target } of routes) {
    const targets = byPath.get(path) ?? new Map<string, A>()
    byPath.set(path, targets)
    if (!targets.has(method)) targets.set(method, target)
  }
  const entries: Array<RouteEntry<A>> = []
  const matchers: Array<(segments: ReadonlyArray<string>) => Record<string, string> | undefined> = []
  for (const [path, targets] of byPath) {
    if (targets.has("GET") && !targets.has("HEAD")) targets.set("HEAD", targets.get("GET")!)
    entries.push({ path, methods: [...targets.keys()], targets })
    const declared = segmentsOf(path)
    matchers.push((segments) => {
      if (segments.length !== declared.length) return undefined
      const params: Record<string, string> = {}
      for (let i = 0; i < declared.length; i++) {
        const expected = declared[i]
        if (expected.startsWith(":")) {
          if (segments[i] === "") return undefined
          params[expected.slice(1)] = segments[i]
        } else if (segments[i] !== expected) return undefined
      }
      return params
    })
  }
  const exact = new Map(entries.filter((entry) => !entry.path.includes("/:")).map((entry) => [entry.path, entry]))

  const match = (path: string): Match<A> | undefined => {
    const trimmed = path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path
    const found = exact.get(trimmed)
    if (found !== undefined) return { entry: found, params: {} }
    const segments = segmentsOf(trimmed)
    for (let i = 0; i < entries.length; i++) {
      const params = matchers[i](segments)
      if (params !== undefined) return { entry: entries[i], params }
    }
    return undefined
  }

  const bunPaths = entries.flatMap((entry) => [[entry.path, entry], [`${entry.path}/`, entry]] as const)
  return { entries, match, bunPaths }
}
