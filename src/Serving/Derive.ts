/**
 * The routes of the request pipeline, derived from the `HttpApi` declaration and nothing else: for each endpoint its
 * method and path, decoders made from its own path, query, header and payload schemas, the middleware the declaration
 * puts on it (with the implementations the HttpApi app itself runs), its handler, the status and encoding of its
 * success, and the status and encoding of each error it declares. Nothing about an endpoint is written here.
 *
 * Deriving is pure: it returns the routes and, for every endpoint it could not serve exactly as the HttpApi app would,
 * the reason. A test keeps that list empty.
 */
import { type HttpApi, type HttpApiMiddleware, HttpApiSchema } from "@effect/platform"
import { Context, Either, Option, type ParseResult, Schema } from "effect"
import type { AnyHandler, ApiHandlers } from "./Handlers.js"
import { makeMiddleware, type Middleware } from "./Middleware.js"
import { headerNamesOf, headersStructOf, singleStringFields, transforms } from "./SchemaShapes.js"

type Decoder = (input: unknown) => Either.Either<unknown, ParseResult.ParseError>

export interface EndpointRoute {
  readonly group: string
  readonly name: string
  readonly method: string
  readonly path: string
  readonly decodePath: Decoder | undefined
  readonly decodeQuery: Decoder | undefined
  /** Decodes the headers the endpoint declares, read from the request's own (`Headers`, as Bun hands them over). */
  readonly decodeHeaders: ((headers: Headers) => ReturnType<Decoder>) | undefined
  readonly decodePayload: Decoder | undefined
  /** The request headers the endpoint declares (lower case, as HttpApi reads them). */
  readonly headerNames: ReadonlyArray<string>
  /** The middleware in the order they run (the first is the outermost, as HttpApi nests them). */
  readonly middleware: ReadonlyArray<Middleware>
  readonly handler: AnyHandler
  readonly successStatus: number
  /** The success's JSON text, or null for an empty body. */
  readonly encodeSuccess: (value: unknown) => string | null
  /** Each declared error, with its status; the first whose type the failure is encodes it. */
  readonly failures: ReadonlyArray<{
    readonly schema: Schema.Schema.Any
    readonly status: number
    readonly is: (u: unknown) => boolean
    readonly encode: (error: unknown) => unknown
  }>
}

export interface Unserved {
  readonly endpoint: string
  readonly reason: string
}

export interface Derived {
  readonly routes: ReadonlyArray<EndpointRoute>
  readonly unserved: ReadonlyArray<Unserved>
}

/**
 * Decodes the headers a struct declares, read by name from the request's `Headers`: what HttpApi decodes from a record
 * of all of them (a struct reads its own properties and ignores the rest), without building that record.
 */
const headersDecoder = (
  schema: Schema.Schema.Any,
  names: ReadonlyArray<string>
): NonNullable<EndpointRoute["decodeHeaders"]> => {
  const decode = decoder(Option.some(schema))!
  return (headers: Headers) => {
    const declared: Record<string, string> = {}
    for (const name of names) {
      const value = headers.get(name)
      if (value !== null) declared[name] = value
    }
    return decode(declared)
  }
}

const decoder = (schema: Option.Option<Schema.Schema.Any>): Decoder | undefined =>
  Option.match(schema, {
    onNone: () => undefined,
    onSome: (s) => Schema.decodeUnknownEither(s as Schema.Schema<unknown, unknown>) as Decoder
  })

/**
 * The routes of `api`, given the handlers of its groups and the context holding its middleware implementations (the
 * context the HttpApi app is built with).
 */
export const deriveRoutes = (
  api: HttpApi.HttpApi.AnyWithProps,
  handlers: Context.Tag.Service<ApiHandlers>,
  middlewareContext: Context.Context<never>
): Derived => {
  const routes: Array<EndpointRoute> = []
  const unserved: Array<Unserved> = []
  const apiMiddleware = [...api.middlewares].reverse()

  for (const group of Object.values(api.groups)) {
    for (const endpoint of Object.values(group.endpoints)) {
      const name = `${group.identifier}.${endpoint.name}`
      const skip = (reason: string) => unserved.push({ endpoint: name, reason })
      const handler = handlers[group.identifier]?.[endpoint.name]
      if (handler === undefined) {
        skip("no handler is given for it")
        continue
      }
      const successes = new Set<Schema.Schema.Any>()
      HttpApiSchema.deunionize(successes, endpoint.successSchema)
      if (successes.size !== 1) {
        skip("it declares several successes")
        continue
      }
      const [success] = successes
      if (HttpApiSchema.getEncoding(success.ast).kind !== "Json") {
        skip("its success is not JSON")
        continue
      }
      if (Option.isSome(endpoint.payloadSchema) && (endpoint.method === "GET" || endpoint.method === "HEAD")) {
        skip("its payload is read from the query")
        continue
      }
      if (Option.isSome(endpoint.payloadSchema)) {
        const ast = endpoint.payloadSchema.value.ast
        if (
          HttpApiSchema.getEncoding(ast).kind !== "Json" || HttpApiSchema.getMultipart(ast) !== undefined ||
          HttpApiSchema.getMultipartStream(ast) !== undefined
        ) {
          skip("its payload is not JSON")
          continue
        }
      }
      if (Option.isSome(endpoint.urlParamsSchema) && !singleStringFields(endpoint.urlParamsSchema.value.ast)) {
        skip("its query has array-valued parameters")
        continue
      }
      if (Option.isSome(endpoint.headersSchema) && headersStructOf(endpoint.headersSchema.value.ast) === undefined) {
        skip("its headers are not a struct of named headers")
        continue
      }

      // Middleware, outermost first: HttpApi nests the API's, then the group's and the endpoint's, each later one around
      // the earlier ones.
      const declared = [...apiMiddleware, ...[...group.middlewares, ...endpoint.middlewares].reverse()]
      const middleware: Array<Middleware> = []
      for (const tag of declared) {
        const implementation = Context.getOption(middlewareContext, tag as unknown as Context.Tag<unknown, unknown>)
        if (Option.isNone(implementation)) {
          skip(`the implementation of the middleware ${tag.key} is not provided`)
          break
        }
        middleware.push(makeMiddleware(tag as HttpApiMiddleware.TagClassAny, implementation.value))
      }
      if (middleware.length !== declared.length) continue

      const status = HttpApiSchema.getStatusSuccess(success)
      const encodeSuccess = success.ast._tag === "VoidKeyword"
        ? () => null
        : transforms(success.ast)
        ? ((encode) => (value: unknown) => JSON.stringify(encode(value)))(
          Schema.encodeSync(success as Schema.Schema<unknown, unknown>)
        )
        : (value: unknown) => JSON.stringify(value)

      const errors = new Set<Schema.Schema.Any>()
      HttpApiSchema.deunionize(errors, endpoint.errorSchema)
      HttpApiSchema.deunionize(errors, group.errorSchema)
      HttpApiSchema.deunionize(errors, api.errorSchema)
      const failures = [...errors].map((schema) => ({
        schema,
        status: HttpApiSchema.getStatusError(schema),
        is: Schema.is(schema),
        encode: Schema.encodeSync(schema as Schema.Schema<unknown, unknown>)
      }))

      const headerNames = Option.match(endpoint.headersSchema, {
        onNone: () => [],
        onSome: (schema) => headerNamesOf(schema.ast)
      })
      routes.push({
        group: group.identifier,
        name: endpoint.name,
        method: endpoint.method,
        path: endpoint.path,
        decodePath: decoder(endpoint.pathSchema),
        decodeQuery: decoder(endpoint.urlParamsSchema),
        decodeHeaders: Option.match(endpoint.headersSchema, {
          onNone: () => undefined,
          onSome: (schema) => headersDecoder(schema, headerNames)
        }),
        decodePayload: decoder(endpoint.payloadSchema),
        headerNames,
        middleware,
        handler,
        successStatus: status,
        encodeSuccess,
        failures
      })
    }
  }
  return { routes, unserved }
}
