/**
 * The raw baseline: a minimal `Bun.serve` + `bun:sqlite` program doing the same work as petstore for the benchmarked
 * operations — the same queries and indexes (it opens a database petstore migrated), the same bearer check against the
 * hashed key (looked up by id, SHA-256 compared in constant time, revocation checked, `last used` written at most once a
 * minute), the same validation, the same JSON bodies and headers. No logging. Not part of the product. What it shares
 * with its peers on Hono and Elysia (`peers/`) is in `baseline.ts`; the validation is written here by hand.
 * Each statement commits on its own: with `RAW_SYNCHRONOUS=FULL` (the default, petstore's durability) a create waits
 * for its own fsync; `RAW_SYNCHRONOUS=NORMAL` is the second baseline, without an fsync per commit.
 *
 *     DATABASE_URL=bench.db PORT=8081 bun bench/raw.ts
 */
import {
  CHALLENGE,
  DEFAULT_LIMIT,
  deprecate,
  MAX_LIMIT,
  MAX_NAME,
  MAX_SAFE,
  openStore,
  POSITIVE,
  type Problem,
  problems,
  refuseBody,
  responseHeaders,
  STATUSES
} from "./baseline.js"

const store = openStore()
const STATUS_SET = new Set<string>(STATUSES)

const baseHeaders = (request: Request) => responseHeaders(request.headers.get("x-request-id"))

const error = (headers: Record<string, string>, problem: Problem) =>
  new Response(JSON.stringify(problem), { status: problem.status, headers })

const unauthorized = (headers: Record<string, string>) => {
  headers["www-authenticate"] = CHALLENGE
  return error(headers, problems.unauthorized)
}

const list = (request: Request) => {
  const headers = baseHeaders(request)
  if (store.authenticate(request.headers.get("authorization")) === undefined) return unauthorized(headers)
  const query = new URL(request.url).searchParams
  const limitText = query.get("limit")
  const status = query.get("status")
  const afterText = query.get("after")
  let limit = DEFAULT_LIMIT
  if (limitText !== null) {
    limit = POSITIVE.test(limitText) ? Number(limitText) : 0
    if (limit < 1 || limit > MAX_LIMIT) return error(headers, problems.invalidQuery("limit"))
  }
  if (status !== null && !STATUS_SET.has(status)) return error(headers, problems.invalidQuery("status"))
  let after = 0
  if (afterText !== null) {
    after = POSITIVE.test(afterText) ? Number(afterText) : 0
    if (after < 1 || after > MAX_SAFE) return error(headers, problems.invalidQuery("after"))
  }
  const page = store.listPets(status ?? undefined, after, limit)
  headers["feed-position"] = page.position
  if (page.link !== undefined) headers.link = page.link
  return new Response(JSON.stringify(page.pets), { headers })
}

const get = (request: Request & { params: { petId: string } }) => {
  const headers = baseHeaders(request)
  deprecate(headers)
  if (store.authenticate(request.headers.get("authorization")) === undefined) return unauthorized(headers)
  const text = request.params.petId
  const id = POSITIVE.test(text) ? Number(text) : 0
  if (id < 1 || id > MAX_SAFE) return error(headers, problems.invalidPath("petId"))
  const pet = store.findPet(id)
  if (pet === null) return error(headers, problems.petNotFound(id))
  return new Response(JSON.stringify(pet), { headers })
}

const create = async (request: Request) => {
  const headers = baseHeaders(request)
  if (store.authenticate(request.headers.get("authorization")) === undefined) return unauthorized(headers)
  const refused = refuseBody(request.headers.get("content-length"), request.headers.get("content-type"))
  if (refused !== undefined) return error(headers, refused)
  let body: any
  try {
    body = JSON.parse(await request.text())
  } catch {
    return error(headers, problems.invalidJson)
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) return error(headers, problems.notAnObject)
  const name = typeof body.name === "string" ? body.name.trim() : undefined
  if (name === undefined || name.length < 1 || name.length > MAX_NAME) {
    return error(headers, problems.invalidField("name"))
  }
  const categoryId = body.categoryId
  if (!Number.isInteger(categoryId) || categoryId < 1 || categoryId > MAX_SAFE) {
    return error(headers, problems.invalidField("categoryId"))
  }
  const status = body.status === undefined ? "available" : body.status
  if (!STATUS_SET.has(status)) return error(headers, problems.invalidField("status"))
  const pet = store.insertPet(name, categoryId, status)
  headers.location = `/v1/pets/${pet.id}`
  return new Response(JSON.stringify(pet), { status: 201, headers })
}

const server = Bun.serve({
  hostname: process.env.HOST ?? "127.0.0.1",
  port: Number(process.env.PORT ?? 8081),
  routes: {
    "/healthz": () => new Response("{\"status\":\"ok\"}", { headers: { "content-type": "application/json" } }),
    "/v1/pets": { GET: list, POST: create },
    "/v1/pets/:petId": { GET: get }
  },
  fetch: (request) => error(baseHeaders(request), problems.nothingHere)
})

process.on("SIGTERM", () => {
  server.stop(true)
  store.close()
  process.exit(0)
})
