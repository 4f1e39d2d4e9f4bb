/**
 * The routes of the request pipeline, derived from the `HttpApi` declaration and the handlers its groups' registrations
 * hand over (`Registration.ts`), and nothing else: for each endpoint its method and path, decoders made from its own
 * path, query, header and payload schemas, the middleware the declaration puts on it (with the implementations the
 * registration was given), its handler, the status and encoding of its success, and the status and encoding of each
 * error it declares. Nothing about an endpoint is written here.
 *
 * Deriving is pure: it returns the routes and, for every endpoint it could not serve exactly as `HttpApiBuilder` would,
 * the reason; the engine then refuses to start.
 */
import {
  type HttpApi,
  HttpApiBuilder,
  type HttpApiEndpoint,
  HttpApiError,
  type HttpApiGroup,
  HttpApiSchema
} from "@effect/platform"
import { Context, Duration, Effect, Either, Option, ParseResult, Schema } from "effect"
import * as AST from "effect/SchemaAST"
import { LongPoll } from "../Domain/LongPoll.js"
import { makeEncodeJson } from "./Encode.js"
import type { AnyHandler } from "./Handlers.js"
import { makeMiddleware } from "./Middleware.js"
import type { RegisteredGroup } from "./Registration.js"

/** The struct a query or headers schema decodes (the only form HttpApi reads them in), if it is one. */
const structOf = (ast: AST.AST): AST.TypeLiteral | undefined => {
  while (ast._tag === "Transformation" || ast._tag === "Refinement") ast = ast.from
  return ast._tag === "TypeLiteral" && ast.indexSignatures.length === 0 ? ast : undefined
}

/** Whether a query field is read as an array (HttpApi would wrap a single value for it). */
const isArrayLike = (ast: AST.AST): boolean =>
  ast._tag === "TupleType" ||
  (ast._tag === "Union" && ast.types.some(isArrayLike)) ||
  ((ast._tag === "Refinement" || ast._tag === "Transformation") && isArrayLike(ast.from))

/**
 * What a payload must be, for the refusal of a body that is not: "a JSON object with a name and a categoryId" (its
 * required fields as sent, in the schema's order), or the encoded schema's own description.
 */
const bodyShape = (schema: Option.Option<Schema.Schema.Any>): string => {
  if (Option.isNone(schema)) return "empty"
  let ast = AST.encodedAST(schema.value.ast)
  while (ast._tag === "Refinement") ast = ast.from
  if (ast._tag !== "TypeLiteral") return `JSON of the form ${String(ast)}`
  const names = ast.propertySignatures.filter((p) => !p.isOptional).map((p) =>
    `${/^[aeiou]/i.test(String(p.name)) ? "an" : "a"} ${String(p.name)}`
  )
  const listed = names.length <= 1 ? names.join("") : `${names.slice(0, -1).join(", ")} and ${names.at(-1)}`
  return listed === "" ? "a JSON object" : `a JSON object with ${listed}`
}

type Decoder = (input: unknown) => Either.Either<unknown, ParseResult.ParseError>

type Query = Readonly<Record<string, string | Array<string>>>

/**
 * HttpApi's own reading of a query for its schema, before the schema decodes it: a single value of a parameter the
 * schema does not read as one string (one it does not name, one of another type) is an array of it. The library's
 * function (exported, not documented), so that a handler gets the query exactly as HttpApi hands it over.
 */
const normalizeUrlParams = (HttpApiBuilder as unknown as {
  readonly normalizeUrlParams: (params: Query, ast: AST.AST) => Query
}).normalizeUrlParams

/**
 * A decoder of a part of the request. A payload's reports every invalid field (`errors: "all"`), so that one answer
 * names them all; what it decodes is HttpApi's either way.
 */
const decoder = (schema: Option.Option<Schema.Schema.Any>, options?: AST.ParseOptions): Decoder | undefined =>
  Option.isNone(schema)
    ? undefined
    : Schema.decodeUnknownEither(schema.value as Schema.Schema<unknown, unknown>, options)

/** The members of these unions (a success or error schema, deunionized as HttpApi reads it). */
const membersOf = (...unions: ReadonlyArray<Schema.Schema.Any>) => {
  const errors = new Set<Schema.Schema.Any>()
  for (const union of unions) HttpApiSchema.deunionize(errors, union)
  return errors
}

/** Why the pipeline cannot serve an endpoint exactly as the HttpApi app does, if it cannot. */
const unservable = (endpoint: HttpApiEndpoint.HttpApiEndpoint.AnyWithProps): string | undefined => {
  const successes = membersOf(endpoint.successSchema)
  if (successes.size !== 1) return "it declares several successes"
  if (HttpApiSchema.getEncoding([...successes][0].ast).kind !== "Json") return "its success is not JSON"
  if (Option.isSome(endpoint.payloadSchema)) {
    if (endpoint.method === "GET" || endpoint.method === "HEAD") return "its payload is read from the query"
    const ast = endpoint.payloadSchema.value.ast
    if (
      HttpApiSchema.getEncoding(ast).kind !== "Json" || HttpApiSchema.getMultipart(ast) !== undefined ||
      HttpApiSchema.getMultipartStream(ast) !== undefined
    ) return "its payload is not JSON"
  }
  const query = Option.map(endpoint.urlParamsSchema, (schema) => structOf(schema.ast))
  if (Option.isSome(query) && !query.value?.propertySignatures.every((p) => !isArrayLike(p.type))) {
    return "its query has array-valued parameters"
  }
  if (Option.isSome(endpoint.headersSchema) && structOf(endpoint.headersSchema.value.ast) === undefined) {
    return "its headers are not a struct of named headers"
  }
}

/**
 * Every error the API declares, in the order of HttpApiBuilder's one error schema for all of its endpoints (the API's,
 * then each group's endpoints' and the group's): a failure is encoded by the first whose type it is, declared on its
 * endpoint or not, as HttpApiBuilder encodes it. Each with its status, encoded as JSON or, if it has none, no body.
 */
const declaredErrors = (api: HttpApi.HttpApi.AnyWithProps) => {
  const schemas = membersOf(api.errorSchema)
  for (const group of Object.values(api.groups)) {
    for (const endpoint of Object.values(group.endpoints)) HttpApiSchema.deunionize(schemas, endpoint.errorSchema)
    HttpApiSchema.deunionize(schemas, group.errorSchema)
  }
  return [...schemas].map((schema) => {
    const encode = Schema.encodeEither(schema as Schema.Schema<unknown, unknown>)
    return {
      schema,
      status: HttpApiSchema.getStatusError(schema),
      is: Schema.is(schema),
      /** The error's JSON text (null for no body), or why its schema refuses it. */
      encode: HttpApiSchema.isVoid(schema.ast)
        ? () => Either.right(null)
        : (value: unknown) => Either.map(encode(value), (encoded) => JSON.stringify(encoded))
    }
  })
}

/**
 * An endpoint's route, given its handler, the implementations of the middleware it runs (outermost first) and the
 * API's errors.
 */
const makeRoute = (
  group: HttpApiGroup.HttpApiGroup.AnyWithProps,
  endpoint: HttpApiEndpoint.HttpApiEndpoint.AnyWithProps,
  served: {
    readonly handler: AnyHandler
    readonly middleware: ReadonlyArray<ReturnType<typeof makeMiddleware>>
    /** The context the registration ran in: what the handler's requests run with, below their own services. */
    readonly context: Context.Context<never>
    readonly failures: ReturnType<typeof declaredErrors>
  }
) => {
  const { context, handler, middleware } = served
  const [success] = membersOf(endpoint.successSchema)
  const headerNames = Option.isNone(endpoint.headersSchema)
    ? []
    : structOf(endpoint.headersSchema.value.ast)!.propertySignatures.map((p) => String(p.name).toLowerCase())
  const decodeDeclared = decoder(endpoint.headersSchema)
  const decodeUrlParams = decoder(endpoint.urlParamsSchema)
  const queryAst = Option.getOrUndefined(endpoint.urlParamsSchema)?.ast
  const encodeJson = makeEncodeJson(success)
  return {
    group: group.identifier,
    name: endpoint.name,
    method: endpoint.method,
    path: endpoint.path,
    decodePath: decoder(endpoint.pathSchema),
    /** Decodes the query as HttpApi reads it (`normalizeUrlParams`). */
    decodeQuery: decodeUrlParams && ((query: Query) => decodeUrlParams(normalizeUrlParams(query, queryAst!))),
    /**
     * Decodes the declared headers, read by name from the request's `Headers`: what HttpApi decodes from a record of
     * all of them (a struct reads its own properties and ignores the rest), without building that record; but for an
     * empty struct, which takes the record whole.
     */
    decodeHeaders: decodeDeclared && ((headers: Headers) => {
      if (headerNames.length === 0) return decodeDeclared(Object.fromEntries(headers))
      const declared: Record<string, string> = {}
      for (const name of headerNames) {
        const value = headers.get(name)
        if (value !== null) declared[name] = value
      }
      return decodeDeclared(declared)
    }),
    decodePayload: decoder(endpoint.payloadSchema, { errors: "all" }),
    /** What the payload must be, for the refusal of a body that is not (`Refusals.decodeFailure`). */
    bodyShape: bodyShape(endpoint.payloadSchema),
    /** The request headers the endpoint declares (lower case, as HttpApi reads them). */
    headerNames,
    /** The middleware in the order they run (the first is the outermost, as HttpApi nests them). */
    middleware,
    handler,
    context,
    /** How long the endpoint holds a request by design (`LongPoll`): its deadline is `REQUEST_TIMEOUT` past it. */
    holdMillis: Option.match(Context.getOption(endpoint.annotations, LongPoll), {
      onNone: () => 0,
      onSome: Duration.toMillis
    }),
    successStatus: HttpApiSchema.getStatusSuccess(success),
    /** The success's JSON text as its schema encodes it (null for an empty body), or why the schema refuses it. */
    encodeSuccess: HttpApiSchema.isVoid(success.ast) ? () => Either.right(null) : encodeJson,
    /** The errors the API declares, each with its status: the first whose type the failure is encodes it. */
    failures: served.failures
  }
}

export type EndpointRoute = ReturnType<typeof makeRoute>

/**
 * The routes of the registered groups: each endpoint a registration handed a handler for, with the middleware the
 * declaration puts on it (their implementations from the registration's context, as `HttpApiBuilder` takes them), or,
 * for each endpoint the engine cannot serve exactly as `HttpApiBuilder` would, the reason.
 */
export const deriveRoutes = (groups: ReadonlyArray<RegisteredGroup>) => {
  const routes: Array<EndpointRoute> = []
  const unserved: Array<{ readonly endpoint: string; readonly reason: string }> = []
  const errors = new Map<HttpApi.HttpApi.AnyWithProps, ReturnType<typeof declaredErrors>>()
  for (const { api, context, handlers } of groups) {
    const failures = errors.get(api) ?? errors.set(api, declaredErrors(api)).get(api)!
    const group = handlers.group
    for (const item of handlers.handlers) {
      const endpoint = item.endpoint as HttpApiEndpoint.HttpApiEndpoint.AnyWithProps
      // Middleware, outermost first: HttpApi nests the API's, then the group's and the endpoint's, each later one
      // around the earlier ones.
      const declared = [...api.middlewares].reverse().concat([...group.middlewares, ...endpoint.middlewares].reverse())
      const missing = declared.find((tag) => Option.isNone(Context.getOption(context, tag as never)))
      const reason = missing !== undefined
        ? `the implementation of the middleware ${missing.key} is not provided`
        : item.withFullRequest && Option.isSome(endpoint.payloadSchema)
        ? "its handler reads the request's body itself (handleRaw)"
        : unservable(endpoint)
      if (reason !== undefined) unserved.push({ endpoint: `${group.identifier}.${endpoint.name}`, reason })
      else {
        const middleware = declared.map((tag) => makeMiddleware(tag, Context.unsafeGet(context, tag as never)))
        // A handler's own ParseError is answered as HttpApiBuilder answers it: the declared HttpApiDecodeError.
        const own = item.handler as AnyHandler
        const handler: AnyHandler = (request) =>
          Effect.catchIf(own(request), ParseResult.isParseError, HttpApiError.HttpApiDecodeError.refailParseError)
        routes.push(makeRoute(group, endpoint, {
          handler: item.uninterruptible ? (request) => Effect.uninterruptible(handler(request)) : handler,
          middleware,
          context,
          failures
        }))
      }
    }
  }
  return { routes, unserved }
}
