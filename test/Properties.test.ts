/**
 * Properties of the HTTP API, generated from the schemas the API declares (`Arbitrary` of `NewPet`, `PetStatus`, …) and
 * checked in-process against the application production serves (test/support/http.ts). Each group has its own
 * database, a SQLite file (the connections production writes with, not the in-memory test client), shared by the runs
 * of its properties.
 */
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Context, Effect, FastCheck as fc, Layer, Schema } from "effect"
import { MAX_SAFE_ID, NAME_MAX_LENGTH, NewPet, type Pet, PetStatus } from "../src/Domain/Pet.js"
import { SQLite } from "./support/backends.js"
import { expectErrorBody, expectPage, type Json, nextLink } from "./support/checks.js"
import { type Server, testServer } from "./support/http.js"

class TestServer extends Context.Tag("test/TestServer")<TestServer, Server>() {}
const TestServerLive = Layer.scoped(TestServer, testServer(SQLite))

const NUM_RUNS = 150
const options = (numRuns = NUM_RUNS) => ({ timeout: 120_000, fastCheck: { numRuns } })

interface Answer {
  readonly status: number
  readonly contentType: string | null
  readonly headers: Headers
  readonly body: Json
}

const send = (path: string, init: RequestInit = {}) =>
  Effect.gen(function*() {
    const server = yield* TestServer
    const response = yield* Effect.promise(() => server.fetch(path, init))
    const text = yield* Effect.promise(() => response.text())
    const answer: Answer = {
      status: response.status,
      contentType: response.headers.get("content-type"),
      headers: response.headers,
      body: text.length === 0 ? undefined : JSON.parse(text)
    }
    return answer
  })

const withKey = (init: RequestInit = {}) =>
  Effect.map(TestServer, (server): RequestInit => ({
    ...init,
    headers: { authorization: `Bearer ${server.key}`, ...init.headers }
  }))

const get = (path: string) => Effect.flatMap(withKey(), (init) => send(path, init))

const post = (body: string) =>
  Effect.flatMap(
    withKey({ method: "POST", body, headers: { "content-type": "application/json" } }),
    (init) => send("/v1/pets", init)
  )

/** Every pet, following `Link: rel="next"` from the first page. */
const walk = (limit: number) =>
  Effect.gen(function*() {
    const seen: Array<Pet> = []
    let next: string | undefined = `/v1/pets?limit=${limit}`
    while (next !== undefined) {
      const page = yield* get(next)
      expect(page.status).toBe(200)
      seen.push(...expectPage(page.body, { limit }))
      next = nextLink(page.headers.get("link"))
    }
    return seen
  })

/** White space that trimming removes: ASCII, no-break, em and ideographic spaces, line and paragraph separators, BOM. */
const padding = fc.string({
  unit: fc.constantFrom(" ", "\t", "\n", "\r", "\u00a0", "\u2003", "\u3000", "\u2028", "\ufeff"),
  maxLength: 3
})

/** What a client sends for a valid NewPet (`Arbitrary` of the decoded type, encoded), padded, status sometimes left out. */
const validBody = fc.record({
  pet: Arbitrary.make(NewPet),
  before: padding,
  after: padding,
  omitStatus: fc.boolean()
}).map(({ after, before, omitStatus, pet }) => {
  const { status, ...encoded } = Schema.encodeSync(NewPet)(pet)
  return {
    body: { ...encoded, name: before + encoded.name + after, ...(omitStatus ? {} : { status }) },
    expected: { name: pet.name, categoryId: pet.categoryId, status: omitStatus ? "available" : status }
  }
})

const codePoints = (text: string) => [...text].length

/** Members that are not fields of a NewPet (nor its `id`): what the contract says is ignored. */
const unknownMembers = (maxDepth: number) =>
  fc.dictionary(
    fc.string().filter((name) => !["name", "categoryId", "status", "id"].includes(name)),
    fc.jsonValue({ maxDepth }),
    { maxKeys: 4 }
  )

/** The characters of a name, from every corner of Unicode: ASCII, white space, controls, BMP, astral, lone surrogates. */
const nameUnit = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 1 }) },
  { weight: 2, arbitrary: fc.constantFrom(" ", "\u00a0", "\u3000") },
  { weight: 4, arbitrary: fc.string({ unit: "grapheme", minLength: 1, maxLength: 1 }) },
  { weight: 2, arbitrary: fc.string({ unit: "binary", minLength: 1, maxLength: 1 }) },
  { weight: 2, arbitrary: fc.constantFrom("🐕", "𝔘", "🏳️‍🌈", "é", "e\u0301", "\u200d", "\u202e", "\uffff") },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 0x1f }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.integer({ min: 0x7f, max: 0x9f }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)) }
)
const unicodeName = fc.oneof(
  fc.string({ unit: nameUnit, minLength: 0, maxLength: 12 }),
  fc.string({ unit: nameUnit, minLength: 190, maxLength: 210 }),
  fc.string({ unit: fc.constantFrom("🐕", "𝔘", "a"), minLength: 195, maxLength: 205 })
)

/** The contract's rule for a name, stated independently of the schemas: 1–200 characters of text once trimmed. */
const isValidName = (name: string) => {
  const trimmed = name.trim()
  const length = codePoints(trimmed)
  return length >= 1 && length <= NAME_MAX_LENGTH && !/[\p{Cc}\p{Cs}]/u.test(trimmed)
}

describe("createPet with valid bodies", () => {
  it.layer(TestServerLive, { timeout: "30 seconds" })((it) => {
    it.effect.prop(
      "a valid NewPet is created, reads back identical through getPet and appears exactly once in a paginated walk",
      { valid: validBody, limit: fc.integer({ min: 20, max: 100 }) },
      ({ limit, valid }) =>
        Effect.gen(function*() {
          const created = yield* post(JSON.stringify(valid.body))
          expect(created.status, JSON.stringify(created.body)).toBe(201)
          const pet: Pet = created.body
          expect(pet).toEqual({ id: pet.id, ...valid.expected })
          expect(created.headers.get("location")).toBe(`/v1/pets/${pet.id}`)
          const read = yield* get(`/v1/pets/${pet.id}`)
          expect(read.status).toBe(200)
          expect(read.body).toEqual(pet)
          const all = yield* walk(limit)
          expect(all.filter((other) => other.id === pet.id)).toEqual([pet])
          expect(new Set(all.map((other) => other.id)).size).toBe(all.length)
        }),
      options()
    )

    it.effect.prop(
      "a name from anywhere in Unicode is created and read back exactly when it is 1 to 200 characters of text",
      { name: unicodeName, categoryId: fc.integer({ min: 1, max: 1000 }) },
      ({ categoryId, name }) =>
        Effect.gen(function*() {
          const created = yield* post(JSON.stringify({ name, categoryId }))
          if (!isValidName(name)) {
            expectErrorBody(created, 400, "invalid_body")
            expect(created.body.message).toContain("'name'")
            return
          }
          expect(created.status, JSON.stringify(created.body)).toBe(201)
          expect(created.body.name).toBe(name.trim())
          const read = yield* get(`/v1/pets/${created.body.id}`)
          expect(read.body).toEqual(created.body)
        }),
      options()
    )

    it.effect.prop(
      "unknown fields and a client-sent id are ignored",
      { valid: validBody, extra: unknownMembers(3), id: fc.option(fc.jsonValue()) },
      ({ extra, id, valid }) =>
        Effect.gen(function*() {
          const body = { ...extra, ...(id === null ? {} : { id }), ...valid.body }
          const created = yield* post(JSON.stringify(body))
          expect(created.status, JSON.stringify(created.body)).toBe(201)
          expect(created.body).toEqual({ id: created.body.id, ...valid.expected })
        }),
      options(100)
    )
  })
})

/** A value of any JSON type other than the ones `accepts` takes. */
const jsonOtherThan = (accepts: (value: Json) => boolean) =>
  fc.oneof(
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.boolean(),
    fc.constant(null),
    fc.string(),
    fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 }),
    fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 })
  ).filter((value) => !accepts(value))

const isString = (value: Json) => typeof value === "string"
const isNumber = (value: Json) => typeof value === "number"

/** A mutation of a valid body that makes it invalid, and the field the error must name. */
const mutation: fc.Arbitrary<{ readonly what: string; readonly field: string; readonly apply: (body: Json) => Json }> =
  fc.oneof(
    fc.constantFrom("name", "categoryId").map((field) => ({
      what: `${field} removed`,
      field,
      apply: ({ [field]: _, ...rest }: Json) => rest
    })),
    fc.record({ field: fc.constant("name"), value: jsonOtherThan(isString) }),
    fc.record({ field: fc.constant("categoryId"), value: jsonOtherThan(isNumber) }),
    fc.record({ field: fc.constant("status"), value: jsonOtherThan(isString) }),
    fc.record({
      field: fc.constant("status"),
      value: fc.string().filter((value) => !(PetStatus.literals as ReadonlyArray<string>).includes(value))
    }),
    fc.record({
      field: fc.constant("name"),
      value: fc.oneof(
        fc.constant(""),
        padding,
        fc.string({ minLength: NAME_MAX_LENGTH + 1, maxLength: NAME_MAX_LENGTH + 50 }).filter((s) =>
          codePoints(s.trim()) > NAME_MAX_LENGTH
        ),
        fc.tuple(fc.string({ minLength: 1 }), fc.integer({ min: 0, max: 0x1f }), fc.string({ minLength: 1 }))
          .map(([a, c, b]) => `x${a}${String.fromCharCode(c)}${b}x`),
        fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => `x${String.fromCharCode(c)}x`)
      )
    }),
    fc.record({
      field: fc.constant("categoryId"),
      value: fc.oneof(
        fc.integer({ min: -(2 ** 31), max: 0 }),
        fc.constantFrom(-0, 2 ** 53, 2 ** 53 + 2, 1e300, -MAX_SAFE_ID),
        fc.double({ min: 2 ** 53, max: 1e308, noNaN: true }),
        fc.double({ min: -1e9, max: 1e15, noNaN: true }).filter((x) => !Number.isInteger(x))
      )
    })
  ).map((m) =>
    "apply" in m
      ? m
      : {
        what: `${m.field} = ${JSON.stringify(m.value)}`,
        field: m.field,
        apply: (body: Json) => ({ ...body, [m.field]: m.value })
      }
  )

describe("createPet with invalid bodies", () => {
  it.layer(TestServerLive, { timeout: "30 seconds" })((it) => {
    /** Nothing was stored: this group's database stays empty. */
    const expectNothingStored = Effect.gen(function*() {
      const list = yield* get("/v1/pets?limit=100")
      expect(list.status).toBe(200)
      expect(list.body).toEqual([])
    })

    it.effect.prop(
      "a body with a field removed, of the wrong type, out of range or null is 400 naming the field, and stores nothing",
      { valid: validBody, mutation, extra: unknownMembers(2) },
      ({ extra, mutation, valid }) =>
        Effect.gen(function*() {
          const body = mutation.apply({ ...extra, ...valid.body })
          const created = yield* post(JSON.stringify(body))
          const error = expectErrorBody(created, 400, "invalid_body")
          expect(error.message, mutation.what).toContain(`'${mutation.field}'`)
          yield* expectNothingStored
        }),
      options(200)
    )

    it.effect.prop(
      "a JSON value that is not an object is 400 and stores nothing",
      {
        value: jsonOtherThan((value) => value !== null && typeof value === "object" && !Array.isArray(value)),
        valid: validBody
      },
      ({ valid, value }) =>
        Effect.gen(function*() {
          expectErrorBody(yield* post(JSON.stringify(value)), 400, "invalid_body")
          expectErrorBody(yield* post(JSON.stringify([valid.body])), 400, "invalid_body")
          yield* expectNothingStored
        }),
      options(100)
    )

    it.effect.prop(
      "a body that is not JSON is 400 invalid_json and stores nothing",
      { valid: validBody, cut: fc.nat(), junk: fc.string({ unit: "binary", maxLength: 5 }) },
      ({ cut, junk, valid }) =>
        Effect.gen(function*() {
          const text = JSON.stringify(valid.body)
          const broken = [
            text.slice(0, cut % text.length), // truncated
            text + "}" + junk, // trailing garbage
            text.replace(":", junk.includes(":") ? "" : junk) // a member without its colon
          ]
          for (const body of broken) {
            if (body.trim().length > 0 && isJson(body)) continue
            expectErrorBody(yield* post(body), 400, "invalid_json")
          }
          yield* expectNothingStored
        }),
      options(100)
    )
  })
})

const isJson = (text: string) => {
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

/** A query string of `limit`, `status` and `after` (sometimes repeated, sometimes odd) and a stray parameter or two. */
const queryValue = fc.oneof(
  fc.integer({ min: -5, max: 120 }).map(String),
  fc.constantFrom(
    ...PetStatus.literals,
    "",
    "0",
    "01",
    "1e1",
    "+5",
    " 5",
    "5 ",
    "0x10",
    "9007199254740991",
    "9007199254740992",
    "99999999999999999999"
  ),
  Arbitrary.make(PetStatus),
  fc.string({ unit: "grapheme", maxLength: 6 }),
  fc.string({ unit: fc.constantFrom("%", "2", "0", "z", "+", "&", "=", "#", ";", "c", "1"), maxLength: 6 })
)
const queryPart = fc.tuple(
  fc.oneof({ weight: 6, arbitrary: fc.constantFrom("limit", "status", "after") }, {
    weight: 1,
    arbitrary: fc.string({ maxLength: 4 })
  }),
  queryValue,
  fc.boolean()
).map(([key, value, raw]) =>
  // Raw parts keep their `%`, `+`, `&` and `=` as they are, but not a `#` (it would end the query) nor white space.
  raw ? `${key}=${value}`.replace(/[#\s]/g, "") : `${encodeURIComponent(key)}=${encodeURIComponent(value)}`
)
const queryString = fc.array(queryPart, { maxLength: 4 }).map((parts) => parts.join("&"))

/** The contract's rule for the query, stated independently of the schemas. */
const expectedQuery = (query: string) => {
  const params = new URLSearchParams(query)
  const one = (name: string) => {
    const all = params.getAll(name)
    return all.length > 1 ? null : all[0]
  }
  const [limit, status, after] = [one("limit"), one("status"), one("after")]
  const positive = (value: string) => /^[1-9][0-9]*$/.test(value) ? Number(value) : Number.NaN
  const valid = limit !== null && status !== null && after !== null &&
    (limit === undefined || (positive(limit) >= 1 && positive(limit) <= 100)) &&
    (status === undefined || (PetStatus.literals as ReadonlyArray<string>).includes(status)) &&
    (after === undefined || positive(after) <= MAX_SAFE_ID)
  return valid
    ? { valid, limit: limit === undefined ? 20 : Number(limit), status, after: after === undefined ? 0 : Number(after) }
    : { valid }
}

describe("listPets with random query strings", () => {
  it.layer(TestServerLive, { timeout: "30 seconds" })((it) => {
    it.effect("seed", () =>
      Effect.forEach(
        Array.from({ length: 45 }, (_, i) => i),
        (i) =>
          post(JSON.stringify({ name: `Seed ${i}`, categoryId: 1 + i, status: PetStatus.literals[i % 3] })).pipe(
            Effect.tap((created) => expect(created.status).toBe(201))
          )
      ))

    it.effect.prop(
      "any query is 200 with a well-formed page or 400 invalid_query, exactly as the contract says",
      { query: queryString },
      ({ query }) =>
        Effect.gen(function*() {
          const answer = yield* get(`/v1/pets?${query}`)
          const expected = expectedQuery(query)
          if (!expected.valid) {
            expectErrorBody(answer, 400, "invalid_query")
            return
          }
          expect(answer.status, `${query} → ${JSON.stringify(answer.body)}`).toBe(200)
          const pets = expectPage(answer.body, expected)
          const link = nextLink(answer.headers.get("link"))
          if (link !== undefined) expect(pets.length).toBe(expected.limit)
        }),
      options(200)
    )
  })
})

const KEY_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"

/** An Authorization value, given the valid key: that key in many forms, near misses of it, other schemes, and noise. */
type MakeValue = (key: string) => string
const authorization: fc.Arbitrary<MakeValue> = fc.oneof<Array<fc.Arbitrary<MakeValue>>>(
  fc.tuple(
    fc.constantFrom("Bearer", "bearer", "BEARER", "BeArEr"),
    fc.integer({ min: 1, max: 3 }),
    fc.integer({ min: 0, max: 2 })
  )
    .map(([scheme, spaces, trailing]): MakeValue => (key) =>
      `${scheme}${" ".repeat(spaces)}${key}${" ".repeat(trailing)}`
    ),
  fc.tuple(fc.nat(), fc.constantFrom(...KEY_ALPHABET)).map(([n, c]): MakeValue => (key) => {
    const at = n % key.length
    return `Bearer ${key.slice(0, at)}${c}${key.slice(at + 1)}`
  }),
  fc.nat().map((n): MakeValue => (key) => `Bearer ${key.slice(0, n % key.length)}${key.slice((n % key.length) + 1)}`),
  fc.string({ unit: fc.constantFrom(...KEY_ALPHABET), minLength: 1, maxLength: 3 }).map((s): MakeValue => (key) =>
    `Bearer ${key}${s}`
  ),
  fc.constantFrom<MakeValue>(
    (key) => `Basic ${key}`,
    (key) => `Token ${key}`,
    (key) => key,
    (key) => `Bearer\t${key}`,
    (key) => `Bearer:${key}`,
    (key) => `Bearer ${key.toUpperCase()}`,
    (key) => `Bearer "${key}"`,
    () => "Bearer"
  ),
  fc.string({ unit: fc.integer({ min: 0x20, max: 0xff }).map((c) => String.fromCharCode(c)), maxLength: 80 }).map(
    (s) => () => s
  ),
  fc.string({ unit: fc.constantFrom(...KEY_ALPHABET), minLength: 60, maxLength: 62 }).map((s) => () =>
    `Bearer psk_${s}`
  )
)

/** The contract's rule: `Bearer` (any case), one or more spaces, the key itself; surrounding white space is not part of a header. */
const grants = (value: string, key: string) => {
  const trimmed = value.replace(/^[ \t]+|[ \t]+$/g, "")
  const space = trimmed.indexOf(" ")
  return space > 0 && trimmed.slice(0, space).toLowerCase() === "bearer" && trimmed.slice(space).trimStart() === key
}

describe("authorization with random values", () => {
  it.layer(TestServerLive, { timeout: "30 seconds" })((it) => {
    it.effect("seed", () =>
      Effect.map(
        post(JSON.stringify({ name: "Guarded", categoryId: 1 })),
        (created) => expect(created.body.id).toBe(1)
      ))

    it.effect.prop(
      "every operation answers 401 with WWW-Authenticate: Bearer unless the value carries the valid key",
      { make: authorization, operation: fc.constantFrom("listPets", "createPet", "getPet") },
      ({ make, operation }) =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const value = make(server.key)
          const headers = { authorization: value, "content-type": "application/json" }
          const answer = yield* operation === "listPets"
            ? send("/v1/pets?limit=1", { headers })
            : operation === "createPet"
            ? send("/v1/pets", { method: "POST", headers, body: JSON.stringify({ name: "Auth", categoryId: 1 }) })
            : send("/v1/pets/1", { headers })
          if (grants(value, server.key)) {
            expect(answer.status, JSON.stringify(value)).toBe(operation === "createPet" ? 201 : 200)
          } else {
            expectErrorBody(answer, 401, "unauthorized")
            expect(answer.headers.get("www-authenticate")).toMatch(/^Bearer\b/)
          }
        }),
      options(200)
    )
  })
})
