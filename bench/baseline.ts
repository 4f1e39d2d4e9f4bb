/**
 * What the bench's baseline programs share: the raw program (`raw.ts`) and its peers on Hono and Elysia (`peers/`) do
 * the same work as petstore for the benchmarked operations, and each framework-neutral part of that work is written
 * here once — the database and its statements, the bearer check against the hashed key, the limits and texts of
 * validation, the headers and the error bodies. Each program only declares its routes and validation its own way.
 * Not part of the product.
 */
import { Database } from "bun:sqlite"
import { createHash, randomUUID, timingSafeEqual } from "node:crypto"

export const MAX_BODY_BYTES = 64 * 1024
export const MAX_SAFE = Number.MAX_SAFE_INTEGER
export const DEFAULT_LIMIT = 20
export const MAX_LIMIT = 100
export const MAX_NAME = 200
/** A positive integer as a query or path parameter is written: no sign, no leading zero, at most 16 digits. */
export const POSITIVE = /^[1-9][0-9]{0,15}$/
/**
 * A pattern of the decimal text of the integers from 1 to `max` as POSITIVE reads them, for a schema that checks text:
 * shorter numbers, then for each digit of `max` its prefix followed by a smaller digit, then `max` itself.
 */
export const decimalUpTo = (max: number): string => {
  const digits = String(max)
  const alternatives = digits.length > 1 ? [`[1-9][0-9]{0,${digits.length - 2}}`] : []
  for (let i = 0; i < digits.length; i++) {
    const low = i === 0 ? 1 : 0
    const digit = Number(digits[i])
    if (digit > low) alternatives.push(`${digits.slice(0, i)}[${low}-${digit - 1}][0-9]{${digits.length - i - 1}}`)
  }
  alternatives.push(digits)
  return `^(?:${alternatives.join("|")})$`
}
export const STATUSES = ["available", "pending", "sold"] as const
export type Status = typeof STATUSES[number]

export interface Pet {
  readonly id: number
  readonly name: string
  readonly categoryId: number
  readonly status: Status
}

/** An error's body, its keys in petstore's order. */
export interface Problem {
  readonly code: string
  readonly message: string
  readonly status: number
}

const problem = (status: number, code: string, message: string): Problem => ({ code, message, status })

export const problems = {
  unauthorized: problem(401, "unauthorized", "The API key is not valid."),
  invalidQuery: (name: string) => problem(400, "invalid_query", `Invalid query parameter '${name}'`),
  invalidPath: (name: string) => problem(400, "invalid_path", `Invalid path parameter '${name}'`),
  /** A body that is an object, with one field invalid. */
  invalidField: (field: string) => problem(400, "invalid_body", `Invalid request body: '${field}' is invalid`),
  notAnObject: problem(400, "invalid_body", "The request body must be a JSON object with a name and a categoryId."),
  invalidJson: problem(400, "invalid_json", "The request body is not valid JSON."),
  tooLarge: problem(413, "payload_too_large", `The request body is over ${MAX_BODY_BYTES} bytes.`),
  unsupportedMediaType: problem(415, "unsupported_media_type", "The request body must be application/json."),
  petNotFound: (id: number) => problem(404, "not_found", `No pet has the id ${id}.`),
  nothingHere: problem(404, "not_found", "Nothing is served here.")
}

/** The challenge of a 401. */
export const CHALLENGE = "Bearer realm=\"petstore\""

const REQUEST_ID = /^[\x21-\x7e]{1,128}$/

/** The headers of every answer: the request id sent (when valid) or a new one, and the fixed ones. */
export const responseHeaders = (sentRequestId: string | null | undefined): Record<string, string> => ({
  "x-request-id": sentRequestId != null && REQUEST_ID.test(sentRequestId) ? sentRequestId : randomUUID(),
  "x-content-type-options": "nosniff",
  "cache-control": "no-store",
  "content-type": "application/json"
})

/** What a get one's answers say besides: the operation is deprecated in favour of the list. */
export const deprecate = (headers: Record<string, string>) => {
  headers.deprecation = "@1767225600"
  headers.sunset = "Thu, 05 Dec 2030 00:00:00 GMT"
  headers.link = "</v1/pets>; rel=\"successor-version\""
}

/** Why a create's body is refused before it is read (its announced length, its media type), or undefined. */
export const refuseBody = (contentLength: string | null | undefined, contentType: string | null | undefined) => {
  if (contentLength != null && Number(contentLength) > MAX_BODY_BYTES) return problems.tooLarge
  if (contentType != null && contentType.split(";")[0].trim().toLowerCase() !== "application/json") {
    return problems.unsupportedMediaType
  }
  return undefined
}

const BEARER = /^bearer +([^\s]+) *$/i
const KEY = /^psk_([0-9a-f]{12})_[A-Za-z0-9_-]{43}$/
const COLUMNS = `id, name, category_id AS "categoryId", status`

type KeyRow = { id: string; name: string; hash: string; lastUsedAt: string | null; revokedAt: string | null }

/**
 * `BASELINE_KEY_RECHECK_MS`: how long a key that passed is trusted before it is checked again, as petstore trusts one
 * for 500 ms (the contract allows a second). 0, the default: checked on every request, as a service written the usual
 * way does.
 */
export const KEY_RECHECK_MS = Number(process.env.BASELINE_KEY_RECHECK_MS ?? 0)

/** The catalogue a baseline serves: the database at DATABASE_URL, migrated by petstore, and its statements. */
export const openStore = () => {
  const db = new Database(process.env.DATABASE_URL ?? "petstore.db")
  db.run("PRAGMA journal_mode = WAL")
  db.run("PRAGMA busy_timeout = 5000")
  // Each statement commits on its own: FULL (the default, petstore's durability) waits for an fsync per commit.
  db.run(`PRAGMA synchronous = ${process.env.RAW_SYNCHRONOUS === "NORMAL" ? "NORMAL" : "FULL"}`)

  const listAll = db.prepare(`SELECT ${COLUMNS} FROM pets WHERE id > ? ORDER BY id LIMIT ?`)
  const listByStatus = db.prepare(`SELECT ${COLUMNS} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`)
  const findOne = db.prepare(`SELECT ${COLUMNS} FROM pets WHERE id = ?`)
  /** The change feed's end, which a list answers as `Feed-Position`: on SQLite the last pet's id, in the feed's id. */
  const feedEnd = db.prepare(`SELECT (SELECT id FROM feed_meta) AS "database", coalesce(max(id), 0) AS "end" FROM pets`)
  const insert = db.prepare(`INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING ${COLUMNS}`)
  const findKey = db.prepare(
    `SELECT id, name, hash, last_used_at AS lastUsedAt, revoked_at AS revokedAt FROM api_keys WHERE id = ?`
  )
  const touchKey = db.prepare(`UPDATE api_keys SET last_used_at = ? WHERE id = ?`)

  /**
   * The key id an `Authorization` header authenticates, or undefined: the key looked up by its id, its SHA-256 compared
   * in constant time, not revoked; `last used` written at most once a minute.
   */
  const check = (header: string | null | undefined): string | undefined => {
    if (header == null) return undefined
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
  /** The headers that passed the check, and when (with BASELINE_KEY_RECHECK_MS). */
  const passed = new Map<string, { readonly id: string; readonly at: number }>()

  return {
    close: () => db.close(),

    authenticate: KEY_RECHECK_MS <= 0 ? check : (header: string | null | undefined): string | undefined => {
      if (header == null) return undefined
      const now = Date.now()
      const known = passed.get(header)
      if (known !== undefined && now - known.at < KEY_RECHECK_MS) return known.id
      const id = check(header)
      if (id !== undefined) passed.set(header, { id, at: now })
      return id
    },

    /**
     * A page of pets after the id `after`, the feed's position read right after it (its `Feed-Position`), and the Link
     * to the next page when there is one.
     */
    listPets: (
      status: string | undefined,
      after: number,
      limit: number
    ): { readonly pets: Array<Pet>; readonly position: string; readonly link: string | undefined } => {
      const pets =
        (status === undefined ? listAll.all(after, limit + 1) : listByStatus.all(status, after, limit + 1)) as Array<
          Pet
        >
      const end = feedEnd.get() as { database: string; end: number }
      const position = `${end.database}.${end.end}`
      if (pets.length <= limit) return { pets, position, link: undefined }
      pets.length = limit
      const params = new URLSearchParams({ limit: String(limit) })
      if (status !== undefined) params.set("status", status)
      params.set("after", String(pets[limit - 1].id))
      return { pets, position, link: `</v1/pets?${params}>; rel="next"` }
    },

    findPet: (id: number) => findOne.get(id) as Pet | null,

    insertPet: (name: string, categoryId: number, status: Status) => insert.get(name, categoryId, status) as Pet
  }
}

export type Store = ReturnType<typeof openStore>
