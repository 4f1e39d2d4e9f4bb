/**
 * A peer of petstore for the bench: the benchmarked operations on Elysia with `@elysiajs/openapi`, written as its docs
 * write a service — routes with `t` schemas for the parameters, bodies and answers, the OpenAPI document at
 * /openapi.json, the bearer check and the headers as lifecycle hooks — doing the raw program's work (`../raw.ts`) on
 * the same database with what they share (`../baseline.ts`). Not part of the product.
 *
 *     DATABASE_URL=bench.db PORT=8083 bun bench/peers/elysia.ts
 */
import { openapi } from "@elysiajs/openapi"
import { Elysia, t } from "elysia"
import {
  CHALLENGE,
  decimalUpTo,
  DEFAULT_LIMIT,
  deprecate,
  MAX_LIMIT,
  MAX_NAME,
  MAX_SAFE,
  openStore,
  type Problem as ProblemBody,
  problems,
  refuseBody,
  responseHeaders,
  STATUSES
} from "../baseline.js"

const store = openStore()

/**
 * A positive integer written in a query or path parameter, at most `max`, as the raw program reads it (Elysia's own
 * coercion of `t.Integer` would also take "020", "+5" or "1e1").
 */
const positive = (max: number) =>
  t.Transform(t.String({ pattern: decimalUpTo(max) })).Decode((text) => Number(text)).Encode((id) => String(id))

/** A name of 1 to MAX_NAME characters once trimmed (`\s` is what `trim` removes). */
const NAME = `^\\s*\\S(?:[\\s\\S]{0,${MAX_NAME - 2}}\\S)?\\s*$`

// A union of literals: `t.UnionEnum` as an optional query parameter is given its first value when absent.
const Status = t.Union([t.Literal(STATUSES[0]), t.Literal(STATUSES[1]), t.Literal(STATUSES[2])])
const Pet = t.Object({ id: t.Integer(), name: t.String(), categoryId: t.Integer(), status: Status })
const Problem = t.Object({ code: t.String(), message: t.String(), status: t.Integer() })

/**
 * What the two hooks below use of their context. They are transform hooks, which Elysia runs before it validates the
 * parameters, so that a request without a valid key is answered 401 whatever else is wrong with it, as in the raw
 * program; Elysia answers the status they return, though its types say a transform hook returns nothing.
 */
interface Hooked {
  readonly request: Request
  readonly set: { headers: Record<string, string | number> }
  readonly status: any
}

/** The bearer check; a 401 without a valid key. */
const bearer = ({ request, set, status }: Hooked) => {
  if (store.authenticate(request.headers.get("authorization")) !== undefined) return
  set.headers["www-authenticate"] = CHALLENGE
  return status(401, problems.unauthorized)
}

/**
 * A create's body refused by its announced length or media type, after the key as in the raw program; Elysia has read
 * and parsed the body before its transform hooks (an error thrown by a parse hook is answered as a parse error).
 */
const acceptable = ({ request, status }: Hooked) => {
  const refused = refuseBody(request.headers.get("content-length"), request.headers.get("content-type"))
  if (refused !== undefined) return status(refused.status, refused)
}

const app = new Elysia()
  .use(openapi({
    path: "/openapi",
    specPath: "/openapi.json",
    documentation: {
      info: { title: "petstore (Elysia peer)", version: "1.0.0" },
      components: { securitySchemes: { bearer: { type: "http", scheme: "bearer" } } }
    }
  }))
  // Every answer's headers: the request id, and the fixed ones.
  .onRequest(({ request, set }) => {
    Object.assign(set.headers, responseHeaders(request.headers.get("x-request-id")))
  })
  // What the schemas and the framework refuse, as petstore's errors.
  .onError(({ code, error, set }) => {
    let problem: ProblemBody
    if (code === "VALIDATION") {
      const field = (error.valueError?.path ?? "").split("/")[1] ?? ""
      problem = error.type === "query" ?
        problems.invalidQuery(field) :
        error.type === "params" ?
        problems.invalidPath(field) :
        field === "" ?
        problems.notAnObject :
        problems.invalidField(field)
    } else if (code === "PARSE") {
      problem = problems.invalidJson
    } else if (code === "NOT_FOUND") {
      problem = problems.nothingHere
    } else {
      return
    }
    set.status = problem.status
    return problem
  })
  .get("/healthz", () => ({ status: "ok" }))
  .get("/v1/pets", ({ query: { after, limit, status }, set }) => {
    const page = store.listPets(status, after ?? 0, limit ?? DEFAULT_LIMIT)
    set.headers["feed-position"] = page.position
    if (page.link !== undefined) set.headers.link = page.link
    return page.pets
  }, {
    transform: bearer,
    query: t.Object({
      limit: t.Optional(positive(MAX_LIMIT)),
      status: t.Optional(Status),
      after: t.Optional(positive(MAX_SAFE))
    }),
    response: { 200: t.Array(Pet), 400: Problem, 401: Problem },
    detail: {
      security: [{ bearer: [] }],
      description: "A page of pets, by id; `Link: rel=\"next\"` when there are more"
    }
  })
  .get("/v1/pets/:petId", ({ params: { petId }, status }) => {
    const pet = store.findPet(petId)
    return pet === null ? status(404, problems.petNotFound(petId)) : pet
  }, {
    // The deprecation is on all its answers, a 401 included.
    transform: [({ set }) => deprecate(set.headers as Record<string, string>), bearer],
    params: t.Object({ petId: positive(MAX_SAFE) }),
    response: { 200: Pet, 400: Problem, 401: Problem, 404: Problem },
    detail: { security: [{ bearer: [] }], deprecated: true }
  })
  .post("/v1/pets", ({ body: { categoryId, name, status }, set }) => {
    const pet = store.insertPet(name.trim(), categoryId, status ?? "available")
    set.headers.location = `/v1/pets/${pet.id}`
    set.status = 201
    return pet
  }, {
    transform: [bearer, acceptable],
    body: t.Object({
      name: t.String({ pattern: NAME }),
      categoryId: t.Integer({ minimum: 1, maximum: MAX_SAFE }),
      status: t.Optional(Status)
    }),
    response: { 201: Pet, 400: Problem, 401: Problem, 413: Problem, 415: Problem },
    detail: { security: [{ bearer: [] }] }
  })
  .listen({ hostname: process.env.HOST ?? "127.0.0.1", port: Number(process.env.PORT ?? 8083) })

process.on("SIGTERM", () => {
  app.stop(true)
  store.close()
  process.exit(0)
})
