/**
 * Regression tests for the defects the reliability suites found (test/Properties.test.ts in-process, test/system
 * against the executable): each one pinned here in-process, where it runs with every `npm test`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { jsonProblem } from "../src/Serving/JsonBody.js"
import { expectErrorBody } from "./support/checks.js"
import { makeTestServer, type Server } from "./support/http.js"

const answer = (server: Server, path: string, init?: RequestInit) =>
  Effect.promise(async () => {
    const response = await server.fetch(path, init)
    const text = await response.text()
    return {
      status: response.status,
      contentType: response.headers.get("content-type"),
      headers: response.headers,
      text,
      body: text ? JSON.parse(text) : undefined
    }
  })

const postRaw = (
  server: Server,
  body: string | Uint8Array,
  headers: Record<string, string> = { "content-type": "application/json" }
) =>
  answer(server, "/v1/pets", { method: "POST", body, headers: { authorization: `Bearer ${server.key}`, ...headers } })

const postJson = (server: Server, value: unknown) => postRaw(server, JSON.stringify(value))

const expectNothingStored = (server: Server) =>
  Effect.map(
    answer(server, "/v1/pets?limit=100", { headers: { authorization: `Bearer ${server.key}` } }),
    (list) => expect(list.body).toEqual([])
  )

describe("names", () => {
  it.scoped("a name with a control character or a lone surrogate is 400 naming 'name', and stores nothing", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      for (
        const name of [
          "a\u0000b",
          "tab\there",
          "line\nbreak",
          "del\u007f",
          "c1\u0085",
          "lone \ud800 high",
          "lone \udc00 low",
          "\ud83d"
        ]
      ) {
        const error = expectErrorBody(yield* postJson(server, { name, categoryId: 1 }), 400, "invalid_body")
        expect(error.message).toContain("'name'")
      }
      yield* expectNothingStored(server)
    }))

  it.scoped("surrounding control white space is trimmed, and what reads back is what the 201 said", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      const created = yield* postJson(server, { name: "\t\n Rex \r\n", categoryId: 1 })
      expect(created.status).toBe(201)
      expect(created.body.name).toBe("Rex")
      const read = yield* answer(server, `/v1/pets/${created.body.id}`, {
        headers: { authorization: `Bearer ${server.key}` }
      })
      expect(read.body).toEqual(created.body)
    }))
})

describe("name length", () => {
  it.scoped("is counted in characters (code points), as the OpenAPI maxLength is: 200 emoji are accepted, 201 are not", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      for (const unit of ["🐕", "𝔘", "é"]) {
        const created = yield* postJson(server, { name: unit.repeat(200), categoryId: 1 })
        expect(created.status).toBe(201)
        expect(created.body.name).toBe(unit.repeat(200))
        const read = yield* answer(server, `/v1/pets/${created.body.id}`, {
          headers: { authorization: `Bearer ${server.key}` }
        })
        expect(read.body).toEqual(created.body)
        const error = expectErrorBody(
          yield* postJson(server, { name: unit.repeat(201), categoryId: 1 }),
          400,
          "invalid_body"
        )
        expect(error.message).toContain("'name'")
      }
    }))
})

describe("deeply nested JSON", () => {
  const nested = (depth: number, inner = "1") => "[".repeat(depth) + inner + "]".repeat(depth)
  const nestedObjects = (depth: number) => "{\"a\":".repeat(depth) + "1" + "}".repeat(depth)

  it.scoped("is 400 invalid_json wherever it sits, not a 500 from describing it, and stores nothing", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      const bodies = [
        nested(10_000),
        nested(30_000),
        nestedObjects(10_000),
        `{"name":"Deep","categoryId":1,"status":${nested(30_000)}}`,
        `{"name":${nested(20_000)},"categoryId":1}`,
        `{"name":"Deep","categoryId":${nestedObjects(5_000)}}`,
        `{"name":"Deep","categoryId":1,"extra":${nested(10_000)}}`,
        `{"name":"Deep","categoryId":1,"extra":${nested(33)}}`
      ]
      for (const body of bodies) {
        const error = expectErrorBody(yield* postRaw(server, body), 400, "invalid_json")
        expect(error.message).toContain("nested")
      }
      yield* expectNothingStored(server)
    }))

  it.scoped("brackets inside strings do not count, and 32 levels are accepted", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      const created = yield* postRaw(server, `{"name":"[[[{{{\\"]]]","categoryId":1,"extra":${nested(31)}}`)
      expect(created.status).toBe(201)
      expect(created.body.name).toBe("[[[{{{\"]]]")
    }))
})

describe("bytes that are not UTF-8", () => {
  it.scoped("are 400 invalid_json, not stored as replacement characters", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      const around = (bytes: ReadonlyArray<number>) =>
        new Uint8Array([...Buffer.from("{\"name\":\"a"), ...bytes, ...Buffer.from("b\",\"categoryId\":1}")])
      for (
        const bytes of [
          [0xff, 0xfe], // never valid
          [0xc0, 0xaf], // overlong '/'
          [0xed, 0xa0, 0x80], // an encoded surrogate
          [0xe2, 0x82], // truncated sequence
          [0x80], // lone continuation byte
          [0xf4, 0x90, 0x80, 0x80] // beyond U+10FFFF
        ]
      ) {
        const error = expectErrorBody(yield* postRaw(server, around(bytes)), 400, "invalid_json")
        expect(error.message).toContain("UTF-8")
      }
      yield* expectNothingStored(server)
      const fine = yield* postRaw(server, new Uint8Array(Buffer.from("{\"name\":\"Ñandú 🐕\",\"categoryId\":1}")))
      expect(fine.status).toBe(201)
      expect(fine.body.name).toBe("Ñandú 🐕")
    }))
})

describe("duplicate member names", () => {
  it("are found at any depth, also when spelled with escapes, and only within one object", () => {
    expect(jsonProblem(`{"name":"a","name":"b","categoryId":1}`)).toContain(`"name"`)
    expect(jsonProblem(`{"name":"a","n\\u0061me":"b"}`)).toContain(`"name"`)
    expect(jsonProblem(`{"x":[{"k":1},{"k":2,"k":3}]}`)).toContain(`"k"`)
    expect(jsonProblem(`{"x":{"a":1},"y":{"a":1}}`)).toBeUndefined()
    expect(jsonProblem(`[{"a":1},{"a":1}]`)).toBeUndefined()
    expect(jsonProblem(`{"a":"a","b":["a","a"],"c":"\\"a\\""}`)).toBeUndefined()
    expect(jsonProblem(`{"__proto__":1,"__proto__":2}`)).toContain("__proto__")
    expect(jsonProblem(`{"":1,"":2}`)).toContain(`""`)
  })

  it.scoped("are 400 invalid_json naming the member, and store nothing", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      for (
        const body of [
          `{"name":"First","name":"Second","categoryId":1}`,
          `{"name":"X","categoryId":1,"categoryId":2}`,
          `{"name":"X","categoryId":1,"status":"sold","status":"pending"}`,
          `{"name":"X","n\\u0061me":"Y","categoryId":1}`,
          `{"name":"X","categoryId":1,"extra":{"a":1,"a":2}}`
        ]
      ) {
        const error = expectErrorBody(yield* postRaw(server, body), 400, "invalid_json")
        expect(error.message).toContain("more than once")
      }
      yield* expectNothingStored(server)
    }))
})

describe("media types", () => {
  const body = JSON.stringify({ name: "Typed", categoryId: 1 })

  it.scoped("a body without a Content-Type, in a charset other than UTF-8, or of a +json type is 415 and stores nothing", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      // A Uint8Array body gets no Content-Type from fetch.
      expectErrorBody(yield* postRaw(server, new Uint8Array(Buffer.from(body)), {}), 415, "unsupported_media_type")
      for (
        const type of [
          "application/json; charset=iso-8859-1",
          "application/json;charset=\"utf-16\"",
          "text/json",
          "application/jsonx",
          "application/merge-patch+json"
        ]
      ) {
        expectErrorBody(yield* postRaw(server, body, { "content-type": type }), 415, "unsupported_media_type")
      }
      yield* expectNothingStored(server)
    }))

  it.scoped("application/json in any case, and with charset utf-8, is accepted", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      for (
        const type of [
          "application/json",
          "APPLICATION/JSON",
          "application/json; charset=UTF-8",
          "application/json;charset=\"utf-8\""
        ]
      ) {
        expect((yield* postRaw(server, body, { "content-type": type })).status, type).toBe(201)
      }
    }))

  it.scoped("an empty body without a Content-Type is 400 invalid_json", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      expectErrorBody(yield* postRaw(server, new Uint8Array(0), {}), 400, "invalid_json")
    }))
})

describe("path parameters that cannot be percent-decoded", () => {
  it.scoped("are 400 invalid_path, not a 405 that allows the very method used", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      for (const petId of ["%zz", "%", "1%", "%c0%b1", "%ff", "%E0%A4%A"]) {
        const response = yield* answer(server, `/v1/pets/${petId}`, {
          headers: { authorization: `Bearer ${server.key}` }
        })
        expectErrorBody(response, 400, "invalid_path")
        expect(response.headers.get("allow")).toBeNull()
      }
    }))
})

describe("repeated query parameters", () => {
  it.scoped("are 400 invalid_query saying so, whatever the values", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      for (
        const query of [
          "limit=1&limit=2",
          "limit=5&limit=5",
          "status=sold&status=pending",
          "status=sold&status=sold",
          "after=1&after=2"
        ]
      ) {
        const response = yield* answer(server, `/v1/pets?${query}`, {
          headers: { authorization: `Bearer ${server.key}` }
        })
        const error = expectErrorBody(response, 400, "invalid_query")
        expect(error.message).toContain(`'${query.split("=")[0]}'`)
        expect(error.message).toContain("more than once")
      }
    }))
})

describe("a GET or HEAD with a body", () => {
  it.scoped("is 400 bad_request, on every route that answers GET", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      // A body announced by its headers: fetch cannot send a GET with a body, the raw-socket corpus does.
      for (const method of ["GET", "HEAD"]) {
        for (const path of ["/v1/pets", "/v1/pets/1", "/healthz"]) {
          for (const framing of [{ "content-length": "7" }, { "transfer-encoding": "chunked" }]) {
            const response = yield* answer(server, path, {
              method,
              headers: { authorization: `Bearer ${server.key}`, ...framing }
            })
            expect(response.status, `${method} ${path}`).toBe(400)
            if (method === "GET") expectErrorBody(response, 400, "bad_request")
          }
        }
      }
      const empty = yield* answer(server, "/v1/pets", {
        headers: { authorization: `Bearer ${server.key}`, "content-length": "0" }
      })
      expect(empty.status).toBe(200)
    }))
})

describe("a very long URL", () => {
  it.scoped("is 414 uri_too_long past 8 KiB, whatever the path", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      const headers = { authorization: `Bearer ${server.key}` }
      const fits = "/v1/pets?x=" + "a".repeat(8 * 1024 - "/v1/pets?x=".length)
      expect((yield* answer(server, fits, { headers })).status).toBe(200)
      for (
        const path of [
          fits + "a",
          "/v1/pets/" + "1".repeat(9000),
          "/nothing/" + "a".repeat(10_000),
          "/healthz?" + "%41".repeat(3000)
        ]
      ) {
        expectErrorBody(yield* answer(server, path, { headers }), 414, "uri_too_long")
      }
    }))
})

describe("a ';' in the path", () => {
  it.scoped("does not end the path as the router would have it: /v1/pets/1;x is no pet, /healthz;x nothing", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      const headers = { authorization: `Bearer ${server.key}` }
      const created = yield* postJson(server, { name: "One", categoryId: 1 })
      expect(created.status).toBe(201)
      expectErrorBody(yield* answer(server, `/v1/pets/${created.body.id};x`, { headers }), 400, "invalid_path")
      expectErrorBody(yield* answer(server, `/v1/pets/${created.body.id};`, { headers }), 400, "invalid_path")
      expectErrorBody(yield* answer(server, "/v1/pets;limit=1", { headers }), 404, "not_found")
      expectErrorBody(yield* answer(server, "/healthz;x"), 404, "not_found")
      expect((yield* answer(server, "/v1/pets?note=a;b", { headers })).status).toBe(200)
    }))
})

describe("other spellings of a path", () => {
  it.scoped("are 404, so that no request reaches a handler around the body checks", () =>
    Effect.gen(function*() {
      const server = yield* makeTestServer
      const headers = { authorization: `Bearer ${server.key}`, "content-type": "application/json" }
      const notUtf8 = new Uint8Array([...Buffer.from("{\"name\":\"a"), 0xff, ...Buffer.from("\",\"categoryId\":1}")])
      for (const path of ["/V1/PETS", "/v1/Pets", "/v1//pets", "//v1/pets", "/v1/p%65ts", "/v1/pets/"]) {
        const created = yield* answer(server, path, { method: "POST", headers, body: notUtf8 })
        if (path === "/v1/pets/") expectErrorBody(created, 400, "invalid_json") // a trailing slash is the same path
        else expectErrorBody(created, 404, "not_found")
      }
      for (const path of ["/V1/PETS", "/v1//pets", "/v1/pets//1", "/HEALTHZ", "/v1/pets/1/x"]) {
        expectErrorBody(yield* answer(server, path, { headers }), 404, "not_found")
      }
      yield* expectNothingStored(server)
    }))
})
