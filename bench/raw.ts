/**
 * The raw baseline: a minimal `Bun.serve` + `bun:sqlite` program doing the same work as petstore for the benchmarked
 * operations — the same queries and indexes (it opens a database petstore migrated), the same bearer check against the
 * hashed key (looked up by id, SHA-256 compared in constant time, revocation checked, `last used` written at most once a
 * minute), the same validation, the same JSON bodies and headers. No logging. Not part of the product.
 * Each statement commits on its own: with `RAW_SYNCHRONOUS=FULL` (the default, petstore's durability) a create waits
 * for its own fsync; `RAW_SYNCHRONOUS=NORMAL` is the second baseline, without an fsync per commit.
 *
 *     DATABASE_URL=bench.db PORT=8081 bun bench/raw.ts
 */
import { Database } from "bun:sqlite"
import { createHash, randomUUID, timingSafeEqual } from "node:crypto"

const db = new Database(process.env.DATABASE_URL ?? "petstore.db")
db.run("PRAGMA journal_mode = WAL")
db.run("PRAGMA busy_timeout = 5000")
db.run(`PRAGMA synchronous = ${process.env.RAW_SYNCHRONOUS === "NORMAL" ? "NORMAL" : "FULL"}`)

const MAX_BODY_BYTES = 64 * 1024
const MAX_SAFE = Number.MAX_SAFE_INTEGER
const REQUEST_ID = /^[\x21-\x7e]{1,128}$/
const BEARER = /^bearer +([^\s]+) *$/i
const KEY = /^psk_([0-9a-f]{12})_[A-Za-z0-9_-]{43}$/
const POSITIVE = /^[1-9][0-9]{0,15}$/
const STATUSES = new Set(["available", "pending", "sold"])

const COLUMNS = `id, name, category_id AS "categoryId", status`
const listAll = db.prepare(`SELECT ${COLUMNS} FROM pets WHERE id > ? ORDER BY id LIMIT ?`)
const listByStatus = db.prepare(`SELECT ${COLUMNS} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`)
const findOne = db.prepare(`SELECT ${COLUMNS} FROM pets WHERE id = ?`)
const insert = db.prepare(`INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING ${COLUMNS}`)
const findKey = db.prepare(
  `SELECT id, name, hash, last_used_at AS lastUsedAt, revoked_at AS revokedAt FROM api_keys WHERE id = ?`
)
const touchKey = db.prepare(`UPDATE api_keys SET last_used_at = ? WHERE id = ?`)

const baseHeaders = (request: Request): Record<string, string> => {
  const sent = request.headers.get("x-request-id")
  return {
    "x-request-id": sent !== null && REQUEST_ID.test(sent) ? sent : randomUUID(),
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
    "content-type": "application/json"
  }
}

const error = (headers: Record<string, string>, status: number, code: string, message: string) =>
  new Response(JSON.stringify({ code, message, status }), { status, headers })

type KeyRow = { id: string; name: string; hash: string; lastUsedAt: string | null; revokedAt: string | null }

/** The authenticated key id, or undefined. */
const authenticate = (request: Request): string | undefined => {
  const header = request.headers.get("authorization")
  if (header === null) return undefined
  const bearer = BEARER.exec(header)
  if (bearer === null) return undefined
  const key = bearer[1]
  const id = KEY.exec(key)
  if (id === null) return undefined
  const row = findKey.get(id[1]) as KeyRow | null
  if (row === null) return undefined
  const presented = createHash("sha256").update(key).digest()
  const stored = Buffer.from(row.hash, "hex")
  if (stored.length !== presented.length || !timingSafeEqual(presented, stored) || row.revokedAt !== null) {
    return undefined
  }
  const now = Date.now()
  if (row.lastUsedAt === null || now - Date.parse(row.lastUsedAt) >= 60_000) {
    touchKey.run(new Date(now).toISOString(), row.id)
  }
  return row.id
}

const unauthorized = (headers: Record<string, string>) => {
  headers["www-authenticate"] = "Bearer realm=\"petstore\""
  return error(headers, 401, "unauthorized", "The API key is not valid.")
}

const list = (request: Request) => {
  const headers = baseHeaders(request)
  if (authenticate(request) === undefined) return unauthorized(headers)
  const query = new URL(request.url).searchParams
  const limitText = query.get("limit")
  const status = query.get("status")
  const afterText = query.get("after")
  let limit = 20
  if (limitText !== null) {
    limit = POSITIVE.test(limitText) ? Number(limitText) : 0
    if (limit < 1 || limit > 100) return error(headers, 400, "invalid_query", "Invalid query parameter 'limit'")
  }
  if (status !== null && !STATUSES.has(status)) {
    return error(headers, 400, "invalid_query", "Invalid query parameter 'status'")
  }
  let after = 0
  if (afterText !== null) {
    after = POSITIVE.test(afterText) ? Number(afterText) : 0
    if (after < 1 || after > MAX_SAFE) return error(headers, 400, "invalid_query", "Invalid query parameter 'after'")
  }
  const rows = (status === null ? listAll.all(after, limit + 1) : listByStatus.all(status, after, limit + 1)) as Array<
    { id: number }
  >
  if (rows.length > limit) {
    rows.length = limit
    const params = new URLSearchParams({ limit: String(limit) })
    if (status !== null) params.set("status", status)
    params.set("after", String(rows[limit - 1].id))
    headers.link = `</v1/pets?${params}>; rel="next"`
  }
  return new Response(JSON.stringify(rows), { headers })
}

const get = (request: Request & { params: { petId: string } }) => {
  const headers = baseHeaders(request)
  headers.deprecation = "@1767225600"
  headers.sunset = "Thu, 05 Dec 2030 00:00:00 GMT"
  headers.link = "</v1/pets>; rel=\"successor-version\""
  if (authenticate(request) === undefined) return unauthorized(headers)
  const text = request.params.petId
  const id = POSITIVE.test(text) ? Number(text) : 0
  if (id < 1 || id > MAX_SAFE) return error(headers, 400, "invalid_path", "Invalid path parameter 'petId'")
  const row = findOne.get(id)
  if (row === null) return error(headers, 404, "not_found", `No pet has the id ${id}.`)
  return new Response(JSON.stringify(row), { headers })
}

const create = async (request: Request) => {
  const headers = baseHeaders(request)
  if (authenticate(request) === undefined) return unauthorized(headers)
  const length = request.headers.get("content-length")
  if (length !== null && Number(length) > MAX_BODY_BYTES) {
    return error(headers, 413, "payload_too_large", "The request body is over 65536 bytes.")
  }
  const type = request.headers.get("content-type")
  if (type !== null && type.split(";")[0].trim().toLowerCase() !== "application/json") {
    return error(headers, 415, "unsupported_media_type", "The request body must be application/json.")
  }
  let body: any
  try {
    body = JSON.parse(await request.text())
  } catch {
    return error(headers, 400, "invalid_json", "The request body is not valid JSON.")
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return error(headers, 400, "invalid_body", "The request body must be a JSON object with a name and a categoryId.")
  }
  const name = typeof body.name === "string" ? body.name.trim() : undefined
  if (name === undefined || name.length < 1 || name.length > 200) {
    return error(headers, 400, "invalid_body", "Invalid request body: 'name' is invalid")
  }
  const categoryId = body.categoryId
  if (!Number.isInteger(categoryId) || categoryId < 1 || categoryId > MAX_SAFE) {
    return error(headers, 400, "invalid_body", "Invalid request body: 'categoryId' is invalid")
  }
  const status = body.status === undefined ? "available" : body.status
  if (!STATUSES.has(status)) return error(headers, 400, "invalid_body", "Invalid request body: 'status' is invalid")
  const row = insert.get(name, categoryId, status) as { id: number }
  headers.location = `/v1/pets/${row.id}`
  return new Response(JSON.stringify(row), { status: 201, headers })
}

const server = Bun.serve({
  hostname: process.env.HOST ?? "127.0.0.1",
  port: Number(process.env.PORT ?? 8081),
  routes: {
    "/healthz": () => new Response("{\"status\":\"ok\"}", { headers: { "content-type": "application/json" } }),
    "/v1/pets": { GET: list, POST: create },
    "/v1/pets/:petId": { GET: get }
  },
  fetch: (request) => error(baseHeaders(request), 404, "not_found", "Nothing is served here.")
})

process.on("SIGTERM", () => {
  server.stop(true)
  db.close()
  process.exit(0)
})
