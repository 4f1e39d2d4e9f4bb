/**
 * The HTTP API in-process, through the application production serves: one test per row of the interface's response
 * tables, and the contract's decisions (auth variants, bad bodies and queries, pagination, headers, error shapes).
 */
import { SqlError } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { openApiDocument } from "../src/Api.js"
import { ApiKeys } from "../src/Auth/ApiKeys.js"
import * as Sql from "../src/Database/Sql.js"
import type { Pet } from "../src/Domain/Pet.js"
import { RoutesLive } from "../src/Http.js"
import { Lifecycle } from "../src/Operations/Lifecycle.js"
import { PetsRepo } from "../src/Pets/Repo.js"
import { WebHandler, webHandlerFrom } from "../src/Serving/WebHandler.js"
import { describeBackends } from "./support/backends.js"
import { authorized, ORIGIN, type Server, servers, testServer } from "./support/http.js"

const json = (response: Response) => Effect.promise(() => response.json() as Promise<any>)
const call = (server: Server, path: string, init?: RequestInit) => Effect.promise(() => server.fetch(path, init))

/** An error answer: JSON `{code, message, status}` with `status` equal to the HTTP status. */
const expectError = (response: Response, status: number, code?: string) =>
  Effect.gen(function*() {
    expect(response.status).toBe(status)
    expect(response.headers.get("content-type")).toContain("application/json")
    const body = yield* json(response)
    expect(Object.keys(body).sort()).toEqual(["code", "message", "status"])
    expect(body.status).toBe(status)
    expect(body.message.length).toBeGreaterThan(0)
    if (code !== undefined) expect(body.code).toBe(code)
    return body as { code: string; message: string; status: number }
  })

const create = (server: Server, body: unknown) =>
  Effect.gen(function*() {
    const response = yield* call(
      server,
      "/v1/pets",
      authorized(server.key, { method: "POST", body: JSON.stringify(body) })
    )
    expect(response.status).toBe(201)
    return (yield* json(response)) as Pet
  })

const OPERATIONS: ReadonlyArray<readonly [string, string, unknown?]> = [
  ["GET", "/v1/pets"],
  ["POST", "/v1/pets", { name: "Rex", categoryId: 1 }],
  ["GET", "/v1/pets/1"]
]

// Every test runs on each backend, on a fresh database of its own.
describeBackends((backend) => {
  const makeTestServer = testServer(backend)

  describe("authentication", () => {
    for (const [method, path, body] of OPERATIONS) {
      const init = (authorization?: string): RequestInit => ({
        method,
        headers: { ...(authorization ? { authorization } : {}), "content-type": "application/json" },
        ...(body ? { body: JSON.stringify(body) } : {})
      })
      it.scoped(`${method} ${path} without a key is 401 with WWW-Authenticate: Bearer`, () =>
        Effect.gen(function*() {
          const server = yield* makeTestServer
          const response = yield* call(server, path, init())
          expect(response.headers.get("www-authenticate")).toMatch(/^Bearer\b/)
          yield* expectError(response, 401, "unauthorized")
        }))
      it.scoped(`${method} ${path} refuses wrong, Basic, empty and near-miss credentials`, () =>
        Effect.gen(function*() {
          const server = yield* makeTestServer
          const nearMiss = server.key.slice(0, -1) + (server.key.endsWith("A") ? "B" : "A")
          for (
            const authorization of [
              "Bearer wrong-key-000",
              `Basic ${Buffer.from(`u:${server.key}`).toString("base64")}`,
              "Bearer ",
              `Bearer ${nearMiss}`,
              `Token ${server.key}`,
              `Bearer ${server.key} extra`
            ]
          ) {
            yield* expectError(yield* call(server, path, init(authorization)), 401, "unauthorized")
          }
        }))
    }

    it.scoped("the scheme word is matched case-insensitively", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        for (const scheme of ["bearer", "BEARER", "Bearer"]) {
          const response = yield* call(server, "/v1/pets", { headers: { authorization: `${scheme} ${server.key}` } })
          expect(response.status).toBe(200)
        }
      }))

    it.scoped("a revoked key is refused on every operation", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const pet = yield* create(server, { name: "Before", categoryId: 1 })
        const other = yield* server.keys.create("other")
        yield* server.keys.revoke(other.id)
        for (const [method, path, body] of OPERATIONS) {
          const response = yield* call(
            server,
            path.replace("/1", `/${pet.id}`),
            authorized(Redacted.value(other.key), { method, ...(body ? { body: JSON.stringify(body) } : {}) })
          )
          yield* expectError(response, 401, "unauthorized")
        }
      }))
  })

  describe("createPet", () => {
    it.scoped("201 with the assigned id, the stored fields and a Location header", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const response = yield* call(
          server,
          "/v1/pets",
          authorized(server.key, {
            method: "POST",
            body: JSON.stringify({ name: "Alpha", categoryId: 3, status: "pending" })
          })
        )
        expect(response.status).toBe(201)
        const pet = yield* json(response)
        expect(pet).toEqual({ id: pet.id, name: "Alpha", categoryId: 3, status: "pending" })
        expect(pet.id).toBeGreaterThan(0)
        expect(response.headers.get("location")).toBe(`/v1/pets/${pet.id}`)
      }))

    it.scoped("status defaults to available, the name is trimmed, a client id and unknown fields are ignored", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const pet = yield* create(server, { id: 987654321, name: "  Spaced  ", categoryId: 2, color: "brown" })
        expect(pet).toEqual({ id: pet.id, name: "Spaced", categoryId: 2, status: "available" })
        expect(pet.id).not.toBe(987654321)
      }))

    it.scoped("ids are unique and increasing", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const a = yield* create(server, { name: "A", categoryId: 1 })
        const b = yield* create(server, { name: "B", categoryId: 1 })
        expect(b.id).toBeGreaterThan(a.id)
      }))

    it.scoped("a name with quotes, unicode and SQL is stored verbatim", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const name = `Robert'); DROP TABLE pets;-- 🐕 Ñandú "quoted" \\ back`
        const pet = yield* create(server, { name, categoryId: 2 })
        expect(pet.name).toBe(name)
        const read = yield* json(yield* call(server, `/v1/pets/${pet.id}`, authorized(server.key)))
        expect(read.name).toBe(name)
      }))

    const badBodies: ReadonlyArray<readonly [string, unknown, string]> = [
      ["missing name", { categoryId: 1 }, "name"],
      ["missing categoryId", { name: "NoCat" }, "categoryId"],
      ["an empty object", {}, "name"],
      ["status outside the enum", { name: "X", categoryId: 1, status: "lost" }, "status"],
      ["categoryId as a string", { name: "X", categoryId: "7" }, "categoryId"],
      ["categoryId fractional", { name: "X", categoryId: 1.5 }, "categoryId"],
      ["categoryId null", { name: "X", categoryId: null }, "categoryId"],
      ["categoryId zero", { name: "X", categoryId: 0 }, "categoryId"],
      ["categoryId negative", { name: "X", categoryId: -4 }, "categoryId"],
      ["categoryId beyond 2^53-1", { name: "X", categoryId: 2 ** 53 }, "categoryId"],
      ["name as a number", { name: 123, categoryId: 1 }, "name"],
      ["name null", { name: null, categoryId: 1 }, "name"],
      ["an empty name", { name: "", categoryId: 1 }, "name"],
      ["a blank name", { name: "   ", categoryId: 1 }, "name"],
      ["a name of 201 characters", { name: "x".repeat(201), categoryId: 1 }, "name"],
      ["status null", { name: "X", categoryId: 1, status: null }, "status"]
    ]
    for (const [what, body, field] of badBodies) {
      it.scoped(`${what} is 400 invalid_body naming '${field}'`, () =>
        Effect.gen(function*() {
          const server = yield* makeTestServer
          const response = yield* call(
            server,
            "/v1/pets",
            authorized(server.key, { method: "POST", body: JSON.stringify(body) })
          )
          const error = yield* expectError(response, 400, "invalid_body")
          expect(error.message).toContain(`'${field}'`)
        }))
    }

    it.scoped("every invalid field of a body is named in one message, each once", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const post = (body: unknown) =>
          call(server, "/v1/pets", authorized(server.key, { method: "POST", body: JSON.stringify(body) }))
        const both = yield* expectError(yield* post({ name: "", categoryId: "x" }), 400, "invalid_body")
        expect(both.message).toBe(
          "Invalid request body: 'name' is invalid: must be a string of 1 to 200 characters without control " +
            "characters, surrounding white space not counted; 'categoryId' is invalid: must be a positive integer " +
            "no larger than 9007199254740991"
        )
        const all = yield* expectError(yield* post({ categoryId: 0, status: "lost" }), 400, "invalid_body")
        expect(all.message).toBe(
          "Invalid request body: 'name' is missing; 'categoryId' is invalid: must be a positive integer no larger " +
            "than 9007199254740991; 'status' is invalid: must be one of available, pending, sold"
        )
      }))

    it.scoped("a name of exactly 200 characters is accepted", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const pet = yield* create(server, { name: "y".repeat(200), categoryId: 1 })
        expect(pet.name.length).toBe(200)
      }))

    it.scoped("bodies that are not a JSON object are 400 and store nothing", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const post = (body: string) => call(server, "/v1/pets", authorized(server.key, { method: "POST", body }))
        yield* expectError(yield* post(JSON.stringify([{ name: "X", categoryId: 1 }])), 400, "invalid_body")
        yield* expectError(yield* post("\"a string\""), 400, "invalid_body")
        yield* expectError(yield* post("null"), 400, "invalid_body")
        const truncated = yield* expectError(yield* post("{\"name\": \"X\", \"categoryId\": "), 400, "invalid_json")
        // Why and where, as every other 400 names its field.
        expect(truncated.message).toBe(
          "The request body is not valid JSON: the body ends where a value is expected, at line 1, column 29."
        )
        yield* expectError(yield* post(""), 400)
        const list = yield* json(yield* call(server, "/v1/pets?limit=100", authorized(server.key)))
        expect(list).toEqual([])
      }))

    it.scoped("a body over 64 KiB is 413 before it is parsed", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const body = JSON.stringify({ name: "x".repeat(70 * 1024), categoryId: 1 })
        const response = yield* call(server, "/v1/pets", authorized(server.key, { method: "POST", body }))
        yield* expectError(response, 413, "payload_too_large")
      }))

    it.scoped("a body of unknown length (chunked) is read up to the limit: a small one is created, a large one 413", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const streamed = (text: string): RequestInit => ({
          method: "POST",
          headers: { authorization: `Bearer ${server.key}`, "content-type": "application/json" },
          body: new Blob([text]).stream(),
          duplex: "half"
        } as RequestInit)
        const small = yield* call(server, "/v1/pets", streamed(JSON.stringify({ name: "Streamed", categoryId: 1 })))
        expect(small.status).toBe(201)
        expect((yield* json(small)).name).toBe("Streamed")
        const large = yield* call(
          server,
          "/v1/pets",
          streamed(JSON.stringify({ name: "x".repeat(200_000), categoryId: 1 }))
        )
        yield* expectError(large, 413, "payload_too_large")
      }))

    it.scoped("a body that is not application/json is 415", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const response = yield* call(
          server,
          "/v1/pets",
          authorized(server.key, {
            method: "POST",
            body: "name=x",
            headers: { "content-type": "application/x-www-form-urlencoded" }
          })
        )
        yield* expectError(response, 415, "unsupported_media_type")
      }))
  })

  describe("getPet", () => {
    it.scoped("200 with the pet, and the deprecation headers", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const created = yield* create(server, { name: "Fetch me", categoryId: 9, status: "sold" })
        const response = yield* call(server, `/v1/pets/${created.id}`, authorized(server.key))
        expect(response.status).toBe(200)
        expect(yield* json(response)).toEqual(created)
        expect(response.headers.get("deprecation")).toMatch(/^@\d+$/)
        expect(response.headers.get("sunset")).toBe("Thu, 05 Dec 2030 00:00:00 GMT")
        expect(response.headers.get("link")).toBe("</v1/pets>; rel=\"successor-version\"")
      }))

    it.scoped("404 with an Error body for an unknown id, still announcing the deprecation", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const response = yield* call(server, "/v1/pets/999999999", authorized(server.key))
        yield* expectError(response, 404, "not_found")
        expect(response.headers.get("sunset")).toBe("Thu, 05 Dec 2030 00:00:00 GMT")
      }))

    it.scoped("a 401 of getPet announces the deprecation too", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const response = yield* call(server, "/v1/pets/1")
        yield* expectError(response, 401)
        expect(response.headers.get("deprecation")).toMatch(/^@\d+$/)
      }))

    it.scoped("an id that is not a positive integer is 400 invalid_path", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        for (const bad of ["abc", "1.5", "-1", "0", "99999999999999999999999", "%20", "1e3", "0x10", "01"]) {
          const error = yield* expectError(
            yield* call(server, `/v1/pets/${bad}`, authorized(server.key)),
            400,
            "invalid_path"
          )
          expect(error.message).toContain("petId")
        }
        // Past 2^53 - 1 (where a JSON number stops being exact) the message gives the bound.
        for (const big of ["9007199254740992", "9999999999999999"]) {
          const error = yield* expectError(
            yield* call(server, `/v1/pets/${big}`, authorized(server.key)),
            400,
            "invalid_path"
          )
          expect(error.message).toBe(
            "Invalid path parameter 'petId': must be a positive integer no larger than 9007199254740991"
          )
        }
        expect((yield* call(server, "/v1/pets/9007199254740991", authorized(server.key))).status).toBe(404)
      }))
  })

  describe("listPets", () => {
    const seed = (server: Server, count: number, status?: (i: number) => string) =>
      Effect.forEach(
        Array.from({ length: count }, (_, i) => i),
        (i) => create(server, { name: `Pet ${i}`, categoryId: 1 + (i % 3), ...(status ? { status: status(i) } : {}) })
      )

    it.scoped("200 with a bare array in id order, 20 by default", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const pets = yield* seed(server, 25)
        const response = yield* call(server, "/v1/pets", authorized(server.key))
        expect(response.status).toBe(200)
        const page = yield* json(response)
        expect(page).toEqual(pets.slice(0, 20))
      }))

    it.scoped("limit=1 and limit=100 bound the page", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        yield* seed(server, 30)
        expect((yield* json(yield* call(server, "/v1/pets?limit=1", authorized(server.key)))).length).toBe(1)
        expect((yield* json(yield* call(server, "/v1/pets?limit=100", authorized(server.key)))).length).toBe(30)
      }))

    for (const bad of ["0", "101", "-5", "abc", "2.5", "", "1e1", " 5", "99999999999999999"]) {
      it.scoped(`limit=${JSON.stringify(bad)} is 400 invalid_query naming limit and its range`, () =>
        Effect.gen(function*() {
          const server = yield* makeTestServer
          const error = yield* expectError(
            yield* call(server, `/v1/pets?limit=${encodeURIComponent(bad)}`, authorized(server.key)),
            400,
            "invalid_query"
          )
          expect(error.message).toBe("Invalid query parameter 'limit': must be an integer from 1 to 100")
        }))
    }

    it.scoped("a bad status or after, and a repeated parameter, are 400 invalid_query", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        for (const query of ["status=bogus", "after=0", "after=x", "limit=1&limit=2"]) {
          yield* expectError(yield* call(server, `/v1/pets?${query}`, authorized(server.key)), 400, "invalid_query")
        }
      }))

    it.scoped("the status filter returns only, and all, the pets with that status", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const pets = yield* seed(server, 12, (i) => ["available", "pending", "sold"][i % 3])
        const page = yield* json(yield* call(server, "/v1/pets?status=pending&limit=100", authorized(server.key)))
        expect(page).toEqual(pets.filter((pet) => pet.status === "pending"))
      }))

    it.scoped("the id filter answers the pet with that id, or []; with status, both must match", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const pets = yield* seed(server, 5, (i) => (i % 2 === 0 ? "available" : "sold"))
        const list = (query: string) =>
          Effect.gen(function*() {
            const response = yield* call(server, `/v1/pets?${query}`, authorized(server.key))
            expect(response.status, query).toBe(200)
            expect(response.headers.get("link"), query).toBeNull()
            return yield* json(response)
          })
        const [first, second] = pets
        expect(yield* list(`id=${second.id}`)).toEqual([second])
        expect(yield* list(`id=${pets.at(-1)!.id + 1000}`)).toEqual([])
        expect(yield* list(`id=${first.id}&status=available`)).toEqual([first])
        expect(yield* list(`id=${first.id}&status=sold`)).toEqual([])
        expect(yield* list(`id=${second.id}&status=sold&limit=1`)).toEqual([second])
        expect(yield* list(`id=${second.id}&after=${first.id}`)).toEqual([second])
        expect(yield* list(`id=${second.id}&after=${second.id}`)).toEqual([])
        for (const bad of ["abc", "0", "-1", "1.5", "", "9007199254740992"]) {
          const error = yield* expectError(
            yield* call(server, `/v1/pets?id=${bad}`, authorized(server.key)),
            400,
            "invalid_query"
          )
          expect(error.message, bad).toContain("'id'")
        }
      }))

    it.scoped("Link rel=next walks every pet exactly once, keeps the filter, and is absent on the last page", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const pets = yield* seed(server, 23, (i) => (i % 2 === 0 ? "available" : "sold"))
        const walk = (first: string) =>
          Effect.gen(function*() {
            const seen: Array<Pet> = []
            let next: string | undefined = first
            while (next !== undefined) {
              const response: Response = yield* call(server, next, authorized(server.key))
              const page: Array<Pet> = yield* json(response)
              seen.push(...page)
              const link = response.headers.get("link")
              next = link === null ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)?.[1]
              if (link !== null) expect(next).toBeDefined()
            }
            return seen
          })
        expect(yield* walk("/v1/pets?limit=5")).toEqual(pets)
        expect(yield* walk("/v1/pets?status=sold&limit=4")).toEqual(pets.filter((pet) => pet.status === "sold"))
        const last = yield* call(server, "/v1/pets?limit=23", authorized(server.key))
        expect(last.headers.get("link")).toBeNull()
        const first = yield* call(server, "/v1/pets?status=sold&limit=4", authorized(server.key))
        expect(first.headers.get("link")).toBe(
          `</v1/pets?limit=4&status=sold&after=${pets.filter((p) => p.status === "sold")[3].id}>; rel="next"`
        )
      }))

    it.scoped("pages stay consistent while pets are added (keyset on id)", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const pets = yield* seed(server, 6)
        const first = yield* json(yield* call(server, "/v1/pets?limit=3", authorized(server.key)))
        const added = yield* create(server, { name: "Late", categoryId: 1 })
        const second = yield* json(
          yield* call(server, `/v1/pets?limit=10&after=${first[2].id}`, authorized(server.key))
        )
        expect([...first, ...second]).toEqual([...pets, added])
      }))
  })

  describe("errors and headers", () => {
    it.scoped("an unknown path under /v1 is 404 with or without a key", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        yield* expectError(yield* call(server, "/v1/no-such-thing"), 404, "not_found")
        yield* expectError(yield* call(server, "/v1/no-such-thing", authorized(server.key)), 404, "not_found")
        yield* expectError(yield* call(server, "/nothing/here"), 404, "not_found")
      }))

    it.scoped("an undeclared method is 405 with an Allow header", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const response = yield* call(server, "/v1/pets", authorized(server.key, { method: "DELETE" }))
        yield* expectError(response, 405, "method_not_allowed")
        expect(response.headers.get("allow")).toBe("GET, POST, HEAD")
        const one = yield* call(server, "/v1/pets/1", authorized(server.key, { method: "PUT", body: "{}" }))
        yield* expectError(one, 405, "method_not_allowed")
        expect(one.headers.get("allow")).toBe("GET, HEAD")
      }))

    it.scoped("every response carries an X-Request-Id; a client's own id is echoed, a bad one replaced", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        for (const path of ["/v1/pets", "/healthz", "/v1/nope", "/openapi.json"]) {
          expect((yield* call(server, path)).headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/)
        }
        const echoed = yield* call(server, "/v1/pets", { headers: { "x-request-id": "client-123" } })
        expect(echoed.headers.get("x-request-id")).toBe("client-123")
        const tooLong = yield* call(server, "/v1/pets", { headers: { "x-request-id": "x".repeat(129) } })
        expect(tooLong.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/)
      }))

    it.scoped("API responses are not cached nor sniffed", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const response = yield* call(server, "/v1/pets", authorized(server.key))
        expect(response.headers.get("cache-control")).toBe("no-store")
        expect(response.headers.get("x-content-type-options")).toBe("nosniff")
      }))
  })

  describe("the server's own routes", () => {
    it.scoped("/healthz and /readyz answer 200 without a key", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        for (const path of ["/healthz", "/readyz"]) {
          const response = yield* call(server, path)
          expect(response.status).toBe(200)
          expect(yield* json(response)).toEqual({ status: "ok" })
        }
      }))

    it.scoped("/favicon.ico is 204 No Content, without a key, and may be cached for a day", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        for (const method of ["GET", "HEAD"]) {
          const response = yield* call(server, "/favicon.ico", { method })
          expect(response.status).toBe(204)
          expect(response.headers.get("cache-control")).toBe("public, max-age=86400")
          expect(yield* Effect.promise(() => response.text())).toBe("")
        }
      }))

    it.scoped("/openapi.json is the generated document with the configured servers", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const response = yield* call(server, "/openapi.json")
        expect(response.status).toBe(200)
        expect(yield* json(response)).toEqual(JSON.parse(JSON.stringify(openApiDocument(servers))))
      }))

    it.scoped("/docs is an HTML page that loads nothing from another host", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const response = yield* call(server, "/docs")
        expect(response.status).toBe(200)
        expect(response.headers.get("content-type")).toContain("text/html")
        const html = yield* Effect.promise(() => response.text())
        expect(html).toContain("api-reference")
        expect(html).not.toMatch(/<(script|link)[^>]+(src|href)\s*=\s*["']?(https?:)?\/\//i)
        expect(html).toContain(servers.staging)
      }))
  })

  describe("the typed client derived from Api", () => {
    it.scoped("creates, lists and gets pets, and fails with the typed NotFound", () =>
      Effect.gen(function*() {
        const { client } = yield* makeTestServer
        const pet = yield* client.createPet({ headers: {}, payload: { name: "Typed", categoryId: 4, status: "sold" } })
        expect(pet).toEqual({ id: pet.id, name: "Typed", categoryId: 4, status: "sold" })
        expect(yield* client.listPets({ urlParams: { limit: 10, status: "sold" } })).toEqual([pet])
        expect(yield* client.getPet({ path: { petId: pet.id } })).toEqual(pet)
        const missing = yield* Effect.flip(client.getPet({ path: { petId: 424242 as Pet["id"] } }))
        expect(missing._tag).toBe("NotFound")
      }))

    it.scoped("without a key it fails with the typed Unauthorized", () =>
      Effect.gen(function*() {
        const server = yield* makeTestServer
        const anonymous = yield* server.clientWith(undefined)
        const error = yield* Effect.flip(anonymous.listPets({ urlParams: {} }))
        expect(error._tag).toBe("Unauthorized")
      }))
  })

  describe("failures of the storage", () => {
    const withRepo = (repo: Partial<PetsRepo>) =>
      Effect.gen(function*() {
        const failingRepo = Layer.succeed(PetsRepo, PetsRepo.make(repo as PetsRepo))
        const context = yield* Layer.build(
          Layer.mergeAll(
            webHandlerFrom(RoutesLive(servers).pipe(Layer.provide(failingRepo)), { corsOrigins: Option.none() }),
            ApiKeys.Default
          ).pipe(
            Layer.provide([ApiKeys.Default, Lifecycle.Default]),
            Layer.provide(Sql.layer(yield* backend.freshDatabase))
          )
        )
        const { key } = yield* Context.get(context, ApiKeys).create("failing")
        const handler = Context.get(context, WebHandler)
        return (path: string) =>
          Effect.promise(async () => handler(new Request(`${ORIGIN}${path}`, authorized(Redacted.value(key)))))
      })

    it.scoped("an unexpected failure is a generic 500 that leaks nothing", () =>
      Effect.gen(function*() {
        const get = yield* withRepo({
          list: () => Effect.die(new Error("SELECT secret FROM somewhere")),
          findById: () => Effect.succeed(Option.none())
        })
        const error = yield* expectError(yield* get("/v1/pets"), 500, "internal_error")
        expect(error.message).not.toContain("SELECT")
      }))

    it.scoped("a database that does not answer is 503 unavailable", () =>
      Effect.gen(function*() {
        const get = yield* withRepo({
          list: () => Effect.fail(new SqlError.SqlError({ cause: new Error("disk I/O error"), message: "boom" }))
        })
        const error = yield* expectError(yield* get("/v1/pets"), 503, "unavailable")
        expect(error.message).not.toContain("disk")
      }))
  })
})
