/**
 * Generated `HttpApi` declarations with their registrations, and generated requests to them, for the differential test
 * of the engine against the library's own server (`test/EngineDifferential.test.ts`).
 *
 * A declaration is plain data (`ApiSpec`): its endpoints (method, path with or without parameters, query, headers,
 * payload, success and errors), its errors at each level, its middleware (providing a service, failing with a declared
 * error, optional, bearer or API-key security) at each level. `buildApi` makes the `HttpApi`, the group's registration
 * and the middleware's implementations from it, the same for both servers. A request is plain data too (`Sent`), so
 * that a case a search finds is written down as it is.
 *
 * Names say which part of a request a field belongs to (`p0` a path parameter, `q0` a query parameter, `x-h0` a header,
 * `b0` a payload field), so that a failed decode names the part on both servers. A handler does what the request's
 * `x-outcome` header says (succeed, fail with the n-th error it declares, fail with an error nobody declared, die,
 * add a header, wait a moment); middleware `i` fails when `x-mw-i` is `fail`, and answers with what it provides.
 */
import {
  HttpApi,
  HttpApiBuilder,
  HttpApiEndpoint,
  HttpApiGroup,
  HttpApiMiddleware,
  HttpApiSchema,
  HttpApiSecurity,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { Arbitrary, Context, Effect, FastCheck as fc, Layer, Redacted, Schema } from "effect"
import { addResponseHeaders } from "../../src/ResponseHeaders.js"
import { registerGroup } from "../../src/Serving/Registration.js"

/** Fields read from text (a path parameter, a query parameter, a header): with and without transformations. */
const TEXT_FIELDS = {
  string: Schema.String,
  nonEmpty: Schema.NonEmptyString,
  trim: Schema.Trim,
  number: Schema.NumberFromString,
  int: Schema.NumberFromString.pipe(Schema.int()),
  positive: Schema.NumberFromString.pipe(Schema.int(), Schema.positive()),
  word: Schema.String.pipe(Schema.pattern(/^[a-z]{1,8}$/), Schema.brand("Word")),
  literal: Schema.Literal("a", "b", "c"),
  boolean: Schema.BooleanFromString,
  json: Schema.parseJson(Schema.Struct({ n: Schema.Int })),
  union: Schema.Union(Schema.Literal("none"), Schema.NumberFromString),
  date: Schema.Date,
  bigint: Schema.BigInt
} satisfies Record<string, Schema.Schema<any, any>>

/** Fields of a JSON payload: the text fields, and JSON's own values. */
const JSON_FIELDS = {
  ...TEXT_FIELDS,
  jsonNumber: Schema.Number,
  jsonInt: Schema.Int,
  jsonBoolean: Schema.Boolean,
  list: Schema.Array(Schema.Number),
  nested: Schema.Struct({ a: Schema.Trim, b: Schema.optional(Schema.Number) }),
  nullable: Schema.NullOr(Schema.String),
  either: Schema.Union(Schema.String, Schema.Number)
} satisfies Record<string, Schema.Schema.Any>

export type TextKind = keyof typeof TEXT_FIELDS
export type JsonKind = keyof typeof JSON_FIELDS

/** The value a field takes when it is absent, for the kinds a default is given to. */
const DEFAULTS: Partial<Record<JsonKind, unknown>> = {
  string: "none",
  trim: "none",
  number: 0,
  int: 0,
  literal: "a",
  boolean: false,
  jsonNumber: 1,
  jsonBoolean: true
}

export interface FieldSpec<K extends string = JsonKind> {
  readonly kind: K
  readonly presence: "required" | "optional" | "default"
}

export interface ErrorSpec {
  readonly kind: "tagged" | "struct" | "empty"
  readonly status: number
}

export interface SuccessSpec {
  /** `echo`: a struct of the decoded request, encoded by the same schemas; `raw`: a response the handler makes. */
  readonly kind: "echo" | "empty" | "text" | "raw"
  readonly status: number
}

export interface EndpointSpec {
  readonly method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE"
  /** The path's segments; `null` is a parameter (`:p<i>`, its index among the segments). */
  readonly segments: ReadonlyArray<string | null>
  /** The parameters' schemas, when the endpoint declares them (`setPath`). */
  readonly path?: ReadonlyArray<TextKind> | undefined
  readonly query?: ReadonlyArray<FieldSpec<TextKind>> | undefined
  readonly headers?: ReadonlyArray<FieldSpec<TextKind>> | undefined
  readonly payload?: ReadonlyArray<FieldSpec> | undefined
  readonly success: SuccessSpec
  readonly errors: ReadonlyArray<ErrorSpec>
}

export interface MiddlewareSpec {
  readonly kind: "provide" | "fail" | "optional" | "bearer" | "apiKeyHeader" | "apiKeyQuery"
  /** The status of the error it fails with. */
  readonly status: number
  /** Where it is declared: the API, the group, or the endpoint of that index. */
  readonly on: "api" | "group" | number
}

export interface ApiSpec {
  readonly prefix?: string | undefined
  readonly endpoints: ReadonlyArray<EndpointSpec>
  readonly groupErrors: ReadonlyArray<ErrorSpec>
  readonly apiErrors: ReadonlyArray<ErrorSpec>
  readonly middleware: ReadonlyArray<MiddlewareSpec>
}

/** A request as it is sent: its method, its target (path and query, as written), its headers and its body. */
export interface Sent {
  readonly method: string
  readonly target: string
  readonly headers: ReadonlyArray<readonly [string, string]>
  readonly body?: string | undefined
}

/** The token and key the security middleware accept. */
export const GOOD_CREDENTIAL = "good-token"

const pathName = (index: number) => `p${index}`
const queryName = (index: number) => `q${index}`
const headerName = (index: number) => `x-h${index}`
const payloadName = (index: number) => `b${index}`

const fieldOf = (spec: FieldSpec<string>): Schema.Schema.Any | Schema.PropertySignature.Any => {
  const schema = (JSON_FIELDS as Record<string, Schema.Schema.Any>)[spec.kind]
  if (spec.presence === "optional") return Schema.optional(schema)
  if (spec.presence === "default" && spec.kind in DEFAULTS) {
    return Schema.optionalWith(schema as Schema.Schema<unknown>, { default: () => DEFAULTS[spec.kind as JsonKind] })
  }
  return schema
}

const structOf = (fields: ReadonlyArray<FieldSpec<string>>, name: (index: number) => string) =>
  Schema.Struct(Object.fromEntries(fields.map((field, index) => [name(index), fieldOf(field)])) as Schema.Struct.Fields)

/** The path as the endpoint declares it, `/a/:p1` (the API's prefix is put before it by `HttpApi.prefix`). */
const declaredPath = (endpoint: EndpointSpec) =>
  `/${endpoint.segments.map((segment, i) => segment ?? `:${pathName(i)}`).join("/")}` as `/${string}`

/** An error's schema and a value of it: a tagged class with a transformed field, a struct, an empty error. */
const makeError = (spec: ErrorSpec, id: string) => {
  const annotations = HttpApiSchema.annotations({ status: spec.status })
  if (spec.kind === "tagged") {
    const E = Schema.TaggedError<any>()(
      `E${id}`,
      { message: Schema.String, count: Schema.NumberFromString },
      annotations
    )
    return { schema: E as Schema.Schema.Any, value: () => new E({ message: `error ${id}`, count: 2 }) }
  }
  if (spec.kind === "empty") {
    const E = HttpApiSchema.EmptyError<any>()({ tag: `Empty${id}`, status: spec.status })
    return { schema: E as Schema.Schema.Any, value: () => new (E as any)() }
  }
  return {
    schema: Schema.Struct({ reason: Schema.String }).annotations(annotations as any) as Schema.Schema.Any,
    value: () => ({ reason: `error ${id}` })
  }
}

/** A failure no endpoint declares. */
class Undeclared {
  readonly _tag = "Undeclared"
}

/**
 * The declaration, its group's registration and the middleware's implementations, made from the spec: the same for
 * the engine and for the library's server.
 */
export const buildApi = (spec: ApiSpec) => {
  const apiErrors = spec.apiErrors.map((error, i) => makeError(error, `api${i}`))
  const groupErrors = spec.groupErrors.map((error, i) => makeError(error, `group${i}`))
  const middleware = spec.middleware.map((mw, i) => {
    const failure = makeError({ kind: "tagged", status: mw.status }, `mw${i}`)
    const provides = Context.GenericTag<string>(`test/Provided${i}`)
    const security = mw.kind === "bearer"
      ? { bearer: HttpApiSecurity.bearer }
      : mw.kind === "apiKeyHeader"
      ? { key: HttpApiSecurity.apiKey({ key: "X-Api-Key", in: "header" }) }
      : mw.kind === "apiKeyQuery"
      ? { key: HttpApiSecurity.apiKey({ key: "api_key", in: "query" }) }
      : undefined
    const tag = HttpApiMiddleware.Tag<any>()(`test/Middleware${i}`, {
      failure: failure.schema,
      ...(mw.kind === "fail" ? {} : { provides }),
      ...(mw.kind === "optional" ? { optional: true } : {}),
      ...(security === undefined ? {} : { security })
    } as any) as any
    /** What it does: adds a header, fails when the request says so, else provides a value naming what it read. */
    const run = (credential: string | undefined) =>
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const control = request.headers[`x-mw-${i}`]
        yield* addResponseHeaders({ [`x-mw-${i}-ran`]: control ?? "yes" })
        if (control === "fail" || (credential !== undefined && credential !== GOOD_CREDENTIAL)) {
          return yield* Effect.fail(failure.value())
        }
        return `mw${i}:${control ?? credential ?? "none"}`
      })
    const implementation = security === undefined
      ? run(undefined)
      : Object.fromEntries(
        Object.keys(security).map((scheme) => [scheme, (token: Redacted.Redacted) => run(Redacted.value(token))])
      )
    return { spec: mw, tag, provides, layer: Layer.succeed(tag, implementation as never) }
  })

  let group: any = HttpApiGroup.make("g")
  const endpointErrors = spec.endpoints.map((endpoint, e) =>
    endpoint.errors.map((error, i) => makeError(error, `e${e}x${i}`))
  )
  spec.endpoints.forEach((endpoint, e) => {
    let declared: any = HttpApiEndpoint.make(endpoint.method)(
      `e${e}`,
      declaredPath(endpoint)
    )
    if (endpoint.path !== undefined) {
      const params = endpoint.segments.flatMap((segment, i) => segment === null ? [i] : [])
      declared = declared.setPath(
        Schema.Struct(Object.fromEntries(params.map((at, i) => [pathName(at), TEXT_FIELDS[endpoint.path![i]]])))
      )
    }
    if (endpoint.query !== undefined) declared = declared.setUrlParams(structOf(endpoint.query, queryName))
    if (endpoint.headers !== undefined) declared = declared.setHeaders(structOf(endpoint.headers, headerName))
    if (endpoint.payload !== undefined) declared = declared.setPayload(structOf(endpoint.payload, payloadName))
    declared = declared.addSuccess(successSchema(endpoint), { status: endpoint.success.status })
    for (const error of endpointErrors[e]) declared = declared.addError(error.schema)
    for (const mw of middleware) if (mw.spec.on === e) declared = declared.middleware(mw.tag)
    group = group.add(declared)
  })
  for (const error of groupErrors) group = group.addError(error.schema)
  for (const mw of middleware) if (mw.spec.on === "group") group = group.middleware(mw.tag)
  let api: any = HttpApi.make("differential").add(group)
  for (const error of apiErrors) api = api.addError(error.schema)
  for (const mw of middleware) if (mw.spec.on === "api") api = api.middleware(mw.tag)
  if (spec.prefix !== undefined) api = api.prefix(spec.prefix)

  const handlerOf = (endpoint: EndpointSpec, e: number) => {
    const failures = [...endpointErrors[e], ...groupErrors, ...apiErrors]
    return (request: any) =>
      Effect.gen(function*() {
        const outcome = request.request.headers["x-outcome"] ?? "ok"
        const provided: Array<string> = []
        for (const mw of middleware) {
          const value = yield* Effect.serviceOption(mw.provides)
          if (value._tag === "Some") provided.push(value.value)
        }
        if (outcome === "die") return yield* Effect.die(new Error("a defect"))
        if (outcome === "undeclared") return yield* Effect.fail(new Undeclared())
        if (outcome.startsWith("fail:")) {
          const failure = failures[Number(outcome.slice(5)) % Math.max(1, failures.length)]
          return yield* failure === undefined ? Effect.fail(new Undeclared()) : Effect.fail(failure.value())
        }
        if (outcome === "headers") yield* addResponseHeaders({ "x-added": "yes", "x-outcome-seen": outcome })
        if (outcome === "wait") yield* Effect.sleep("1 millis")
        switch (endpoint.success.kind) {
          case "empty":
            return undefined
          case "text":
            return provided.join(",")
          case "raw":
            return HttpServerResponse.text(`raw ${provided.join(",")}`, {
              status: endpoint.success.status,
              headers: { "x-raw": "yes" }
            })
          case "echo": {
            const echoed: Record<string, unknown> = { provided }
            for (const part of ["path", "urlParams", "headers", "payload"] as const) {
              if (part in request) echoed[part] = request[part]
            }
            return echoed
          }
        }
      })
  }
  /** The registration both servers run: `HttpApiBuilder.group`'s function of the group's handlers. */
  const registration = (handlers: any) =>
    spec.endpoints.reduce((registered, endpoint, e) => registered.handle(`e${e}`, handlerOf(endpoint, e)), handlers)
  const middlewareLive = middleware.length === 0
    ? Layer.empty
    : Layer.mergeAll(...(middleware.map((mw) => mw.layer) as unknown as [Layer.Layer<never>]))
  return {
    api: api as HttpApi.HttpApi.Any,
    /** The group registered for the engine (`Registration.ts`). */
    registered: registerGroup(api, "g" as never, registration as never) as Effect.Effect<any, never, never>,
    /** The library's own API layer on the same registration. */
    library: HttpApiBuilder.api(api).pipe(
      Layer.provide(HttpApiBuilder.group(api, "g" as never, registration as never)),
      Layer.provide(middlewareLive)
    ) as Layer.Layer<HttpApi.Api>,
    middlewareLive: middlewareLive as Layer.Layer<never>
  }
}

/** The success schema the spec declares (its status is given with it). */
const successSchema = (endpoint: EndpointSpec): Schema.Schema.Any => {
  switch (endpoint.success.kind) {
    case "empty":
      return Schema.Void
    case "text":
    case "raw":
      return Schema.String
    case "echo": {
      const fields: Record<string, Schema.Schema.Any> = { provided: Schema.Array(Schema.String) }
      if (endpoint.path !== undefined) {
        const params = endpoint.segments.flatMap((segment, i) => segment === null ? [i] : [])
        fields.path = Schema.Struct(
          Object.fromEntries(params.map((at, i) => [pathName(at), TEXT_FIELDS[endpoint.path![i]]]))
        )
      }
      if (endpoint.query !== undefined) fields.urlParams = structOf(endpoint.query, queryName)
      if (endpoint.headers !== undefined) fields.headers = structOf(endpoint.headers, headerName)
      if (endpoint.payload !== undefined) fields.payload = structOf(endpoint.payload, payloadName)
      return Schema.Struct(fields)
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------------------------------

const textKinds = Object.keys(TEXT_FIELDS) as Array<TextKind>
const jsonKinds = Object.keys(JSON_FIELDS) as Array<JsonKind>
const ERROR_STATUSES = [400, 401, 403, 404, 409, 410, 422, 429, 500, 503]

const fieldArb = <K extends string>(kinds: ReadonlyArray<K>) =>
  fc.record({
    kind: fc.constantFrom(...kinds),
    presence: fc.constantFrom("required" as const, "optional" as const, "default" as const)
  })

const errorArb: fc.Arbitrary<ErrorSpec> = fc.record({
  kind: fc.constantFrom("tagged" as const, "struct" as const, "empty" as const),
  status: fc.constantFrom(...ERROR_STATUSES)
})

const SEGMENTS = ["a", "b", "items", "x-y", "v1.2"]

const endpointArb: fc.Arbitrary<EndpointSpec> = fc.record({
  method: fc.constantFrom("GET" as const, "POST" as const, "PUT" as const, "PATCH" as const, "DELETE" as const),
  segments: fc.array(fc.oneof(fc.constantFrom(...SEGMENTS), fc.constant(null)), { minLength: 1, maxLength: 3 }),
  withPath: fc.boolean(),
  pathKinds: fc.array(fc.constantFrom(...textKinds), { minLength: 3, maxLength: 3 }),
  query: fc.option(fc.array(fieldArb(textKinds), { maxLength: 3 }), { nil: undefined }),
  headers: fc.option(fc.array(fieldArb(textKinds), { maxLength: 2 }), { nil: undefined }),
  payload: fc.option(fc.array(fieldArb(jsonKinds), { maxLength: 3 }), { nil: undefined }),
  success: fc.oneof(
    fc.record({ kind: fc.constant("echo" as const), status: fc.constantFrom(200, 201, 202) }),
    fc.record({ kind: fc.constant("empty" as const), status: fc.constantFrom(200, 202, 204) }),
    fc.record({ kind: fc.constant("text" as const), status: fc.constantFrom(200, 203) }),
    fc.record({ kind: fc.constant("raw" as const), status: fc.constantFrom(200, 201, 299) })
  ),
  errors: fc.array(errorArb, { maxLength: 3 })
}).map(({ pathKinds, withPath, ...endpoint }) => {
  const params = endpoint.segments.filter((segment) => segment === null).length
  return {
    ...endpoint,
    path: withPath && params > 0 ? pathKinds.slice(0, params) : undefined,
    // A GET's payload is read from its query: an endpoint the engine does not serve.
    payload: endpoint.method === "GET" ? undefined : endpoint.payload
  }
})

/** Whether two declared paths can match the same request path without being the same path. */
const overlap = (a: ReadonlyArray<string | null>, b: ReadonlyArray<string | null>) =>
  a.length === b.length && a.some((s, i) => s !== b[i]) &&
  a.every((s, i) => s === null || b[i] === null || s === b[i])

export const apiSpecArb: fc.Arbitrary<ApiSpec> = fc.record({
  prefix: fc.option(fc.constantFrom("/v1", "/api/v2"), { nil: undefined }),
  endpoints: fc.array(endpointArb, { minLength: 1, maxLength: 4 }),
  groupErrors: fc.array(errorArb, { maxLength: 2 }),
  apiErrors: fc.array(errorArb, { maxLength: 1 }),
  middleware: fc.array(
    fc.record({
      kind: fc.constantFrom(
        "provide" as const,
        "fail" as const,
        "optional" as const,
        "bearer" as const,
        "apiKeyHeader" as const,
        "apiKeyQuery" as const
      ),
      status: fc.constantFrom(401, 403, 429),
      on: fc.oneof(fc.constant("api" as const), fc.constant("group" as const), fc.nat({ max: 3 }))
    }),
    { maxLength: 3 }
  )
}).map((spec) => {
  // One endpoint per method and path; no two paths that overlap (a parameter where another has a fixed segment).
  const endpoints: Array<EndpointSpec> = []
  for (const endpoint of spec.endpoints) {
    const clash = endpoints.some((other) =>
      overlap(other.segments, endpoint.segments) ||
      (other.method === endpoint.method && other.segments.join("/") === endpoint.segments.join("/"))
    )
    if (!clash) endpoints.push(endpoint)
  }
  return {
    ...spec,
    endpoints,
    middleware: spec.middleware.map((mw) =>
      typeof mw.on === "number"
        ? { ...mw, on: mw.on % endpoints.length }
        // The library runs the API's middleware before routing, where no query is parsed yet: an API key in the query
        // is a defect there (a 500 for every request), a case left out.
        : mw.kind === "apiKeyQuery" && mw.on === "api"
        ? { ...mw, on: "group" as const }
        : mw
    )
  }
})

/** Text as a header value can carry it: visible ASCII and spaces, not at the ends. */
const headerSafe = (text: string) => /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(text)

const JUNK = ["", " ", "0", "-1", "1.5", "1e3", "NaN", "true", "null", "{}", "{\"n\":1.5}", "a b", "é", "%", "ABC"]
const junkArb = fc.oneof(fc.constantFrom(...JUNK), fc.string({ maxLength: 6 }))

/** A value of a field as its encoded text: valid (an encoded value of its schema) or not. */
const textValueArb = (kind: JsonKind) => {
  const schema = JSON_FIELDS[kind] as Schema.Schema<unknown, unknown>
  const valid = Arbitrary.make(schema).map((value) => {
    const encoded = Schema.encodeSync(schema)(value)
    return typeof encoded === "string" ? encoded : JSON.stringify(encoded)
  })
  return fc.oneof({ weight: 4, arbitrary: valid }, { weight: 1, arbitrary: junkArb })
}

/** Percent-encodings of a path segment or a query value: as `encodeURIComponent` writes it, raw, odd. */
const encodedArb = (text: string) =>
  fc.constantFrom(
    encodeURIComponent(text),
    encodeURIComponent(text),
    // Raw, but what ends a path segment (`;` too, where the library's router starts a query: `docs/decisions.md`).
    text.replace(/[/?#%;\s]/g, encodeURIComponent),
    encodeURIComponent(text).replace(/%[0-9A-F]{2}/g, (hex) => hex.toLowerCase()),
    [...text].map((c) => `%${c.charCodeAt(0).toString(16).padStart(2, "0")}`).join("").replace(/%[0-9a-f]{3,}/g, ""),
    `${encodeURIComponent(text)}%zz`,
    encodeURIComponent(encodeURIComponent(text))
  )

const queryArb = (fields: ReadonlyArray<FieldSpec<TextKind>> | undefined, spec: ApiSpec) =>
  fc.tuple(
    fc.tuple(
      ...(fields ?? []).map((field, i) =>
        fc.oneof(
          { weight: 6, arbitrary: textValueArb(field.kind).map((value) => [[queryName(i), value]]) },
          { weight: 2, arbitrary: fc.constant([]) },
          {
            weight: 1,
            arbitrary: fc.tuple(textValueArb(field.kind), textValueArb(field.kind)).map((
              [a, b]
            ) => [[queryName(i), a], [queryName(i), b]])
          }
        )
      )
    ),
    fc.array(fc.tuple(fc.constantFrom("zz", "q9", "__proto__", "constructor", "api_key", "q0[]"), junkArb), {
      maxLength: 2
    }),
    spec.middleware.some((mw) => mw.kind === "apiKeyQuery")
      ? fc.option(fc.constantFrom(GOOD_CREDENTIAL, "bad"), { nil: undefined })
      : fc.constant(undefined)
  ).chain(([declared, extra, key]) => {
    const pairs = [...declared.flat(), ...extra, ...(key === undefined ? [] : [["api_key", key]])] as Array<
      [string, string]
    >
    if (pairs.length === 0) return fc.constantFrom("", "", "?")
    return fc.tuple(...pairs.map(([name, value]) => encodedArb(value).map((v) => `${name}=${v}`))).map((parts) =>
      `?${parts.join("&")}`
    )
  })

const pathArb = (spec: ApiSpec, endpoint: EndpointSpec) =>
  fc.tuple(
    fc.tuple(...endpoint.segments.map((segment, i) =>
      segment === null
        ? textValueArb(endpoint.path?.[endpoint.segments.slice(0, i).filter((s) => s === null).length] ?? "string")
          .chain(encodedArb)
        : fc.oneof(
          { weight: 12, arbitrary: fc.constant(segment) },
          {
            weight: 1,
            arbitrary: fc.constantFrom(segment.toUpperCase(), encodeURIComponent(segment).replace("a", "%61"))
          }
        )
    )),
    fc.oneof(
      { weight: 12, arbitrary: fc.constant("") },
      { weight: 1, arbitrary: fc.constantFrom("/", "//", "/extra", "/.", "%2F") }
    ),
    fc.oneof({ weight: 15, arbitrary: fc.constant("/") }, { weight: 1, arbitrary: fc.constantFrom("//", "/./") })
  ).map(([segments, tail, lead]) => `${spec.prefix ?? ""}${lead}${segments.join("/")}${tail}`)

const bodyArb = (fields: ReadonlyArray<FieldSpec> | undefined): fc.Arbitrary<string | undefined> => {
  const schema = structOf(fields ?? [], payloadName) as unknown as Schema.Schema<unknown, unknown>
  const valid = Arbitrary.make(schema).map((value) => JSON.stringify(Schema.encodeSync(schema)(value)))
  const mutated = fc.tuple(valid, fc.nat({ max: 5 }), junkArb).map(([text, how, junk]) => {
    const object = JSON.parse(text) as Record<string, unknown>
    const names = Object.keys(object)
    if (how === 0 && names.length > 0) delete object[names[0]]
    else if (how === 1) object[names[0] ?? "b0"] = junk
    else if (how === 2) object.extra = junk
    else if (how === 3) object[names[0] ?? "b0"] = null
    else if (how === 4) return `${text.slice(0, -1)}${names.length > 0 ? "," : ""}"b0":1}`
    else return JSON.stringify([object])
    return JSON.stringify(object)
  })
  return fc.oneof(
    { weight: 8, arbitrary: valid },
    { weight: 4, arbitrary: mutated },
    { weight: 1, arbitrary: fc.constant(undefined) },
    {
      weight: 2,
      arbitrary: fc.constantFrom("", "{", "null", "\"text\"", "[]", "1", "{\"b0\":1,}", "{\"a\":[[[[[[[[]]]]]]]]}")
    },
    { weight: 1, arbitrary: fc.constant(`{"b0":"${"x".repeat(70_000)}"}`) }
  )
}

const headersArb = (spec: ApiSpec, endpoint: EndpointSpec | undefined, body: string | undefined) =>
  fc.record({
    declared: fc.tuple(
      ...(endpoint?.headers ?? []).map((field, i) =>
        fc.option(
          textValueArb(field.kind).map((value) => [headerName(i), headerSafe(value) ? value : "x"] as const),
          { nil: undefined, freq: 4 }
        )
      )
    ),
    outcome: fc.option(
      fc.constantFrom("ok", "die", "undeclared", "headers", "wait", "fail:0", "fail:1", "fail:2", "fail:3"),
      { nil: undefined }
    ),
    middleware: fc.array(fc.option(fc.constantFrom("fail", "v"), { nil: undefined, freq: 2 }), {
      minLength: spec.middleware.length,
      maxLength: spec.middleware.length
    }),
    authorization: fc.option(
      fc.constantFrom(
        `Bearer ${GOOD_CREDENTIAL}`,
        `Bearer ${GOOD_CREDENTIAL}`,
        "Bearer bad",
        "bearer good-token",
        "Basic x",
        "Bearer"
      ),
      { nil: undefined }
    ),
    apiKey: fc.option(fc.constantFrom(GOOD_CREDENTIAL, "bad"), { nil: undefined }),
    contentType: body === undefined
      ? fc.option(fc.constantFrom("application/json", "text/plain"), { nil: undefined, freq: 4 })
      : fc.oneof(
        { weight: 10, arbitrary: fc.constant("application/json") },
        {
          weight: 2,
          arbitrary: fc.constantFrom(
            undefined,
            "text/plain",
            "APPLICATION/JSON",
            "application/json; charset=utf-8",
            "application/json; charset=latin1",
            "application/merge-patch+json",
            "application/x-www-form-urlencoded"
          )
        }
      ),
    odd: fc.array(
      fc.constantFrom<readonly [string, string]>(
        ["x-request-id", "client-id"],
        ["x-request-id", "x".repeat(200)],
        ["x-huge", "h".repeat(9000)],
        ["x-odd", "\"quoted\", comma; semi"],
        ["accept", "text/event-stream"],
        ["origin", "http://elsewhere.test"],
        ["content-length", "0"],
        ["transfer-encoding", "chunked"]
      ),
      { maxLength: 2 }
    )
  }).map(({ apiKey, authorization, contentType, declared, middleware, odd, outcome }) => [
    ...declared.flatMap((header) => header === undefined ? [] : [header]),
    ...(outcome === undefined ? [] : [["x-outcome", outcome] as const]),
    ...middleware.flatMap((value, i) => value === undefined ? [] : [[`x-mw-${i}`, value] as const]),
    ...(authorization === undefined ? [] : [["authorization", authorization] as const]),
    ...(apiKey === undefined ? [] : [["x-api-key", apiKey] as const]),
    ...(contentType === undefined ? [] : [["content-type", contentType] as const]),
    ...odd.filter(([name]) => name !== "content-length" && name !== "transfer-encoding" || body === undefined)
  ])

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "patch", "FOO"]

/** A request to an endpoint of the API (mostly its own method, valid or not), or to a path it does not declare. */
export const requestArb = (spec: ApiSpec): fc.Arbitrary<Sent> =>
  fc.oneof(
    { weight: 9, arbitrary: fc.constantFrom(...spec.endpoints) },
    { weight: 1, arbitrary: fc.constant(undefined) }
  ).chain((endpoint) =>
    fc.record({
      method: endpoint === undefined
        ? fc.constantFrom(...METHODS)
        : fc.oneof({ weight: 8, arbitrary: fc.constant(endpoint.method) }, {
          weight: 1,
          arbitrary: fc.constantFrom(...METHODS)
        }),
      path: endpoint === undefined
        ? fc.constantFrom("/", "/nowhere", `${spec.prefix ?? ""}/a/b/c/d`, "/%", "/a%2Fb", "/items/")
        : pathArb(spec, endpoint),
      query: queryArb(endpoint?.query, spec),
      // A body mostly where the endpoint takes one.
      body: fc.oneof({ weight: endpoint?.payload === undefined ? 1 : 8, arbitrary: bodyArb(endpoint?.payload) }, {
        weight: endpoint?.payload === undefined ? 6 : 1,
        arbitrary: fc.constant(undefined)
      })
    }).chain(({ body: generated, method, path, query }) => {
      // GET and HEAD requests carry no body (`Request` refuses one).
      const body = method === "GET" || method === "HEAD" ? undefined : generated
      return headersArb(spec, endpoint, body).map((headers): Sent => ({
        method,
        target: `${path}${query}`,
        headers,
        body
      }))
    })
  )
