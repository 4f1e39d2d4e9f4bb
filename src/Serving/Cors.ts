/**
 * CORS (the Fetch standard's protocol), on when `CORS_ORIGINS` is set: a preflight to a served path is answered
 * without a key, with the methods the route table gives that path; every other answer to an allowed origin names it
 * and exposes the headers a client reads. An origin that is not allowed gets answers without CORS headers (the
 * browser then withholds them from the page), its preflight a 403 saying so. Every answer says `Vary: Origin`, those
 * to a request without an `Origin` or from an origin not allowed too: a cache must not hand an answer made for one
 * origin to another.
 * (`HttpApiBuilder.middlewareCors` answers every `OPTIONS`, an unknown path's too, with one fixed list of methods, and
 * leaves `Vary` off answers to an origin it does not allow: these rules are the route table's and the cache's.)
 */
import { DOCUMENTED_RESPONSE_HEADERS } from "../Api.js"
import * as Refusals from "./Refusals.js"

/** The response headers a browser client may read: those the API documents, and the server's own. */
const EXPOSED_HEADERS = [...DOCUMENTED_RESPONSE_HEADERS, "x-request-id", "allow"].join(", ")

/** The request headers a page may send besides the CORS-safelisted ones. */
const ALLOWED_HEADERS = ["authorization", "content-type", "x-request-id"]

const MAX_AGE_SECONDS = "600"

/** What every answer says while CORS is on, whatever its origin. */
const VARY = { vary: "Origin" } as const

/** CORS for these origins (`["*"]`: any origin, without credentials). */
export const makeCors = (origins: ReadonlyArray<string>) => {
  const any = origins.includes("*")
  const allowed = new Set(origins)
  const allows = (origin: string | null): origin is string => origin !== null && (any || allowed.has(origin))
  /** The headers every answer to this origin carries (`Vary` alone without an origin or for one not allowed). */
  const headersFor = (origin: string | null): Readonly<Record<string, string>> =>
    allows(origin)
      ? {
        "access-control-allow-origin": any ? "*" : origin,
        "access-control-expose-headers": EXPOSED_HEADERS,
        ...VARY
      }
      : VARY
  return {
    headersFor,
    /**
     * The headers of the 204 answering a preflight from an allowed origin to a path that answers these methods and
     * declares these headers; the refusal of a preflight from another origin; undefined for any other request.
     */
    preflight: (request: Request, methods: ReadonlyArray<string>, declared: () => ReadonlyArray<string>) => {
      if (request.method !== "OPTIONS" || !request.headers.has("access-control-request-method")) return undefined
      const origin = request.headers.get("origin")
      if (origin === null) return undefined
      if (!allows(origin)) return Refusals.originNotAllowed(origin)
      return {
        ...headersFor(origin),
        "access-control-allow-methods": methods.join(", "),
        "access-control-allow-headers": [...new Set([...ALLOWED_HEADERS, ...declared()])].join(", "),
        "access-control-max-age": MAX_AGE_SECONDS
      }
    }
  }
}

export type Cors = ReturnType<typeof makeCors>
