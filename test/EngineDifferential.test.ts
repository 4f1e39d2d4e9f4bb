/**
 * The engine serves what `HttpApiBuilder.toWebHandler` serves, searched for: generated declarations (paths with and
 * without parameters; query, headers and payloads with and without transformations, optional fields and defaults;
 * successes with statuses, transformations or none; declared errors at each level; middleware that provides, fails or
 * is optional; bearer and API-key security: `support/differential.ts`) and generated requests to them (valid, invalid,
 * hostile: other methods, odd paths and percent-encodings, repeated query parameters, bad or missing bodies, other
 * content types, odd and huge headers) are served by the engine and by the library's own server
 * (`support/reference.ts`) from the same declaration and registration, and compared.
 *
 * Every answer has the same status and headers, and the same body, but where the difference is the server's own
 * (`docs/engine.md`), which the comparison leaves out, and only that:
 * - the headers the server adds to every answer and the date (`reference.ts`'s `SERVER_HEADERS`);
 * - the server's own refusals, made before an endpoint runs (`SERVER_REFUSALS`: the limits, a body where none is
 *   declared, a body not JSON, the route table's 404 and 405), not compared. The library has no such gates (it answers
 *   a body it cannot parse with a 500, and a request to no route with an empty 404 after running the API's
 *   middleware), and its router takes more spellings of a path than the declared one the engine routes
 *   (`docs/decisions.md`): another case, doubled or trailing slashes, an empty parameter (`/a/` for `/a/:id`). What
 *   the engine routes to an endpoint is compared whole; the wording of `invalid_json` is not compared at all;
 * - a path parameter that cannot be percent-decoded is 400 `invalid_path` (`docs/hostile-input.md`), once the
 *   middleware passed, where the library's router routes nowhere (an empty 404);
 * - a failed decode is answered with the interface's `Error` (`{code, message, status}`) where the library answers its
 *   `HttpApiDecodeError`: the same status (400) and headers, and the same first issue (the part, which the field's name
 *   says, and the field);
 * - an unexpected failure (a defect, an undeclared error) is the engine's `internal_error` body: the same status (500)
 *   and headers;
 * - a HEAD is answered without a body (the engine's answer to the GET says which kind of answer it is).
 *
 * Not generated: what the library's router reads otherwise by design (`;` ending a path, where the engine reads a
 * parameter `1;x`: `docs/hostile-input.md`), an API key in the query checked by the API's own middleware (which the
 * library runs before it parses the query: a 500 for every request), and what other tests own: parameter paths that
 * overlap fixed ones, successes their schema refuses, handlers that read the request's scope or body text, fail with
 * their own `ParseError` or interrupt themselves.
 *
 * `DIFFERENTIAL_RUNS` runs more declarations than CI does (`DIFFERENTIAL_SEED` replays one search); a failure prints
 * the seed and the shrunk case, which becomes a named case below.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc, Layer } from "effect"
import * as Refusals from "../src/Serving/Refusals.js"
import { RegisteredGroups } from "../src/Serving/Registration.js"
import { type ApiSpec, apiSpecArb, buildApi, requestArb, type Sent } from "./support/differential.js"
import { engineServer } from "./support/engine.js"
import { ORIGIN } from "./support/http.js"
import { comparable, referenceServer, SERVER_REFUSALS } from "./support/reference.js"

const RUNS = Number(process.env.DIFFERENTIAL_RUNS ?? 30)
const SEED = process.env.DIFFERENTIAL_SEED === undefined ? undefined : Number(process.env.DIFFERENTIAL_SEED)

/** The codes of the engine's answers to a failed decode, by the prefix of the field's name (`differential.ts`). */
const DECODE_FAILURES: Record<string, string> = {
  invalid_path: "p",
  invalid_query: "q",
  invalid_header: "x-h",
  invalid_body: "b"
}

type Answer = Awaited<ReturnType<typeof comparable>>

const json = (text: string): any => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

const withoutContentType = ({ "content-type": _, ...headers }: Record<string, string>) => headers

/** Checks the two answers to one request agree, but for what the doc comment above says they may not. */
const expectSame = (sent: Sent, engine: Answer, library: Answer) => {
  try {
    expectAgree(sent, engine, library)
  } catch (error) {
    const shown = (answer: Answer) => JSON.stringify({ ...answer, body: answer.body.slice(0, 400) })
    throw new Error(
      `${String(error)}\n  request: ${JSON.stringify(sent).slice(0, 600)}\n  engine:  ${shown(engine)}\n  library: ${
        shown(library)
      }`
    )
  }
}

const expectAgree = (sent: Sent, engine: Answer, library: Answer) => {
  const request = `${sent.method} ${sent.target.slice(0, 120)}`
  const refusal = engine.status >= 400 ? json(engine.body) : undefined
  const code: string | undefined = typeof refusal?.code === "string" && refusal.status === engine.status
    ? refusal.code
    : undefined
  if (code !== undefined && SERVER_REFUSALS.has(code)) return
  if (!percentDecodable(sent)) {
    // The library routes nowhere (unless the API's middleware answered first); the engine answers invalid_path, or
    // what its middleware answer first.
    if (code === "invalid_path") expect(engine.body).toBe(unreadablePath(sent))
    if (library.status === 404 && library.body === "") return
  }
  if (code !== undefined && code in DECODE_FAILURES) {
    if (sent.method === "HEAD") {
      expect({ request, status: library.status, headers: library.headers }).toEqual({
        request,
        status: 400,
        headers: engine.headers
      })
      return
    }
    const issue = json(library.body)?.issues?.[0]
    const field: string = issue?.path?.join(".") ?? ""
    const part = Object.keys(DECODE_FAILURES).find((candidate) => field.startsWith(DECODE_FAILURES[candidate]))
    expect({ request, status: library.status, tag: json(library.body)?._tag, headers: library.headers }).toEqual({
      request,
      status: 400,
      tag: "HttpApiDecodeError",
      headers: engine.headers
    })
    // A path parameter that cannot be percent-decoded names no field; a body that is not an object names none either.
    if (field !== "") {
      expect({ request, code, field: engine.body.includes(`'${field}'`) }).toEqual({ request, code: part, field: true })
    }
    return
  }
  if (code === "internal_error") {
    expect({ request, status: library.status, headers: withoutContentType(library.headers) }).toEqual({
      request,
      status: 500,
      headers: withoutContentType(engine.headers)
    })
    return
  }
  const head = sent.method === "HEAD" ? { body: "" } : {}
  expect({ request, ...library, ...head }).toEqual({ request, ...engine, ...head })
}

/** Whether the request's path can be percent-decoded (the library's router routes nowhere a path that cannot). */
const percentDecodable = (sent: Sent) => {
  try {
    decodeURIComponent(new URL(requestOf(sent).url).pathname)
    return true
  } catch {
    return false
  }
}

/** The engine's answer to a path parameter that cannot be percent-decoded. */
const unreadablePath = (sent: Sent) => Refusals.refusalBody(Refusals.unreadablePath(requestOf(sent).url.split("?")[0]))

function requestOf(sent: Sent) {
  return new Request(`${ORIGIN}${sent.target}`, {
    method: sent.method,
    headers: sent.headers as Array<[string, string]>,
    ...(sent.body === undefined ? {} : { body: sent.body })
  })
}

/** Serves the requests by the engine and by the library, from the spec's declaration and registration, and compares. */
const serveBoth = (spec: ApiSpec, requests: ReadonlyArray<Sent>) =>
  Effect.scoped(Effect.gen(function*() {
    const built = buildApi(spec)
    const engine = yield* engineServer(
      Layer.scoped(RegisteredGroups, Effect.all([built.registered])).pipe(Layer.provide(built.middlewareLive))
    )
    const library = yield* referenceServer(built.library)
    for (const sent of requests) {
      const [a, b, get] = yield* Effect.promise(() =>
        Promise.all([
          Promise.resolve(engine(requestOf(sent))).then(comparable),
          library(requestOf(sent)).then(comparable),
          sent.method === "HEAD"
            ? Promise.resolve(engine(requestOf({ ...sent, method: "GET" }))).then(comparable)
            : null
        ])
      )
      // A HEAD is the GET without its body (the engine's answer to the GET says what the answer is).
      expectSame(sent, get === null ? a : { ...a, body: get.body }, b)
    }
  }))

describe("the engine against the library's own server, on generated declarations and requests", () => {
  it("answers every generated request as the library does", { timeout: 60_000 + RUNS * 2_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(
        apiSpecArb.chain((spec) =>
          fc.tuple(fc.constant(spec), fc.array(requestArb(spec), { minLength: 1, maxLength: 16 }))
        ),
        ([spec, requests]) => Effect.runPromise(serveBoth(spec, requests))
      ),
      { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: SEED }) }
    )
  })
})

/** An endpoint with nothing but a path, for the cases below to vary. */
const endpoint = (overrides: Partial<ApiSpec["endpoints"][number]> = {}): ApiSpec["endpoints"][number] => ({
  method: "GET",
  segments: ["a"],
  success: { kind: "echo", status: 200 },
  errors: [],
  ...overrides
})

const api = (overrides: Partial<ApiSpec> = {}): ApiSpec => ({
  endpoints: [endpoint()],
  groupErrors: [],
  apiErrors: [],
  middleware: [],
  ...overrides
})

const sent = (target: string, init: Partial<Sent> = {}): Sent => ({ method: "GET", target, headers: [], ...init })

describe("the cases the search found", () => {
  it.effect("a failure is encoded by the first error of the API's that it is, declared on its endpoint or not", () =>
    serveBoth(
      api({
        endpoints: [
          endpoint({ errors: [{ kind: "struct", status: 400 }] }),
          endpoint({ segments: ["b"], errors: [{ kind: "struct", status: 409 }] })
        ],
        groupErrors: [{ kind: "struct", status: 410 }]
      }),
      [sent("/b", { headers: [["x-outcome", "fail:0"]] }), sent("/b", { headers: [["x-outcome", "fail:1"]] })]
    ))

  it.effect("a query value that cannot be percent-decoded is read as sent, as the library's router reads it", () =>
    serveBoth(api({ endpoints: [endpoint({ query: [] })] }), [
      sent("/a?zz=%2Bcus%7C%3F%zz"),
      sent("/a?zz=%c0%b1&%zz=1&a+b=c+d&=x&y&&z=1=2")
    ]))

  it.effect("headers declared as an empty struct are the request's headers, all of them, as HttpApi decodes them", () =>
    serveBoth(api({ endpoints: [endpoint({ headers: [] })] }), [
      sent("/a", { headers: [["x-request-id", "client-id"], ["x-other", "1"]] })
    ]))

  it.effect("a declared error without a body (HttpApiSchema.EmptyError) is answered without one, and no Content-Type", () =>
    serveBoth(api({ groupErrors: [{ kind: "empty", status: 400 }] }), [
      sent("/a", { headers: [["x-outcome", "fail:0"]] })
    ]))

  it.effect("a path parameter that cannot be percent-decoded is invalid_path, decoded by the endpoint or not", () =>
    serveBoth(api({ endpoints: [endpoint({ segments: [null], success: { kind: "raw", status: 200 } })] }), [
      sent("/%"),
      sent("/%zz"),
      sent("/%c0%b1")
    ]))

  it.effect("a query read as HttpApi reads it: a parameter the schema does not read as one string is an array", () =>
    serveBoth(api({ endpoints: [endpoint({ query: [] })] }), [sent("/a?zz=%2520&q9=null"), sent("/a?zz=1&zz=2")]))
})
