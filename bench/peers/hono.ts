/**
 * A peer of petstore for the bench: the benchmarked operations on Hono with `@hono/zod-openapi`, written as its docs
 * write a service — routes declared with `createRoute` and zod schemas for the parameters, bodies and answers, the
 * OpenAPI document at /openapi.json, the bearer check as middleware — doing the raw program's work (`../raw.ts`) on
 * the same database with what they share (`../baseline.ts`). Not part of the product.
 *
 *     DATABASE_URL=bench.db PORT=8082 bun bench/peers/hono.ts
 */
import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi"
import { createMiddleware } from "hono/factory"
import { HTTPException } from "hono/http-exception"
import {
  CHALLENGE,
  DEFAULT_LIMIT,
  deprecate,
  MAX_LIMIT,
  MAX_NAME,
  MAX_SAFE,
  openStore,
  POSITIVE,
  problems,
  refuseBody,
  responseHeaders,
  STATUSES
} from "../baseline.js"

const store = openStore()

/** A positive integer written in a query or path parameter, at most `max`. */
const positive = (max: number) => z.string().regex(POSITIVE).transform(Number).pipe(z.int().min(1).max(max))

const Pet = z.object({ id: z.int(), name: z.string(), categoryId: z.int(), status: z.enum(STATUSES) }).openapi("Pet")
const NewPet = z.object({
  name: z.string().trim().min(1).max(MAX_NAME),
  categoryId: z.int().min(1).max(MAX_SAFE),
  status: z.enum(STATUSES).default("available")
}).openapi("NewPet")
const Problem = z.object({ code: z.string(), message: z.string(), status: z.int() }).openapi("Problem")

const json = <T extends z.ZodType>(schema: T, description: string) => ({
  content: { "application/json": { schema } },
  description
})
const security = [{ bearer: [] }]

/** Every answer's headers: the request id, and the fixed ones. */
const headers = createMiddleware(async (c, next) => {
  const fixed = responseHeaders(c.req.header("x-request-id"))
  for (const name in fixed) c.header(name, fixed[name])
  await next()
})

/** A get one's deprecation, on all its answers. */
const deprecated = createMiddleware(async (c, next) => {
  const added: Record<string, string> = {}
  deprecate(added)
  for (const name in added) c.header(name, added[name])
  await next()
})

const bearer = createMiddleware(async (c, next) => {
  if (store.authenticate(c.req.header("authorization")) === undefined) {
    c.header("www-authenticate", CHALLENGE)
    return c.json(problems.unauthorized, 401)
  }
  await next()
})

/** A body refused by its announced length or media type, before it is read. */
const acceptable = createMiddleware(async (c, next) => {
  const refused = refuseBody(c.req.header("content-length"), c.req.header("content-type"))
  if (refused !== undefined) return c.json(refused, refused.status as 413 | 415)
  await next()
})

const listPets = createRoute({
  method: "get",
  path: "/v1/pets",
  security,
  middleware: [bearer] as const,
  request: {
    query: z.object({
      limit: positive(MAX_LIMIT).default(DEFAULT_LIMIT),
      status: z.enum(STATUSES).optional(),
      after: positive(MAX_SAFE).optional()
    })
  },
  responses: {
    200: json(z.array(Pet), "A page of pets, by id; `Link: rel=\"next\"` when there are more"),
    400: json(Problem, "An invalid query parameter"),
    401: json(Problem, "No valid API key")
  }
})

const getPet = createRoute({
  method: "get",
  path: "/v1/pets/{petId}",
  security,
  deprecated: true,
  middleware: [deprecated, bearer] as const,
  request: { params: z.object({ petId: positive(MAX_SAFE) }) },
  responses: {
    200: json(Pet, "The pet"),
    400: json(Problem, "An invalid pet id"),
    401: json(Problem, "No valid API key"),
    404: json(Problem, "No pet has this id")
  }
})

const createPet = createRoute({
  method: "post",
  path: "/v1/pets",
  security,
  middleware: [bearer, acceptable] as const,
  request: { body: { content: { "application/json": { schema: NewPet } }, required: true } },
  responses: {
    201: json(Pet, "The pet created; `Location` names it"),
    400: json(Problem, "A body that is not JSON, or an invalid field"),
    401: json(Problem, "No valid API key"),
    413: json(Problem, "A body over 64 KiB"),
    415: json(Problem, "A body that is not application/json")
  }
})

const app = new OpenAPIHono({
  // A parameter or body the schemas refuse: petstore's error, naming the first field refused.
  defaultHook: (result, c) => {
    if (result.success) return
    const path = result.error.issues[0]?.path ?? []
    const field = String(path[0] ?? "")
    const problem = result.target === "query" ?
      problems.invalidQuery(field) :
      result.target === "param" ?
      problems.invalidPath(field) :
      path.length === 0 ?
      problems.notAnObject :
      problems.invalidField(field)
    return c.json(problem, 400)
  }
})

app.openAPIRegistry.registerComponent("securitySchemes", "bearer", { type: "http", scheme: "bearer" })
app.use("*", headers)

app.openapi(listPets, (c) => {
  const { after, limit, status } = c.req.valid("query")
  const page = store.listPets(status, after ?? 0, limit)
  c.header("feed-position", page.position)
  if (page.link !== undefined) c.header("link", page.link)
  return c.json(page.pets, 200)
})

app.openapi(getPet, (c) => {
  const { petId } = c.req.valid("param")
  const pet = store.findPet(petId)
  return pet === null ? c.json(problems.petNotFound(petId), 404) : c.json(pet, 200)
})

app.openapi(createPet, (c) => {
  const { categoryId, name, status } = c.req.valid("json")
  const pet = store.insertPet(name, categoryId, status)
  c.header("location", `/v1/pets/${pet.id}`)
  return c.json(pet, 201)
})

app.get("/healthz", (c) => c.json({ status: "ok" }))
app.doc("/openapi.json", { openapi: "3.0.0", info: { title: "petstore (Hono peer)", version: "1.0.0" } })

app.notFound((c) => c.json(problems.nothingHere, 404))
// What the framework refuses itself: a body that is not JSON (400), a media type the route does not declare (415).
app.onError((error, c) => {
  if (error instanceof HTTPException && error.status === 400) return c.json(problems.invalidJson, 400)
  if (error instanceof HTTPException && error.status === 415) return c.json(problems.unsupportedMediaType, 415)
  return error instanceof HTTPException ? error.getResponse() : c.json({ message: "Internal Server Error" }, 500)
})

const server = Bun.serve({
  hostname: process.env.HOST ?? "127.0.0.1",
  port: Number(process.env.PORT ?? 8082),
  fetch: app.fetch
})

process.on("SIGTERM", () => {
  server.stop(true)
  store.close()
  process.exit(0)
})
