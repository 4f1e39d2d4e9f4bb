/**
 * What the docs page can do for a newcomer: its document's first server is the one it is read from, its examples are
 * requests the service accepts and answers it really gives, the bearer scheme is preselected, `/` leads to it, and the
 * page itself travels compressed and may be kept by the browser.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { brotliDecompressSync, gunzipSync } from "node:zlib"
import { BASE_PATH } from "../src/Api.js"
import * as Sql from "../src/Database/Sql.js"
import { ErrorBody } from "../src/Domain/Errors.js"
import { Changes } from "../src/Domain/Feed.js"
import { NewPet, Pet, Pets } from "../src/Domain/Pet.js"
import { chooseEncoding, DOCS_CACHE_CONTROL } from "../src/System.js"
import { authorized, type Server, testServerOn } from "./support/http.js"

const makeServer = testServerOn(Sql.SqlTest)
const call = (server: Server, path: string, init?: RequestInit) => Effect.promise(() => server.fetch(path, init))
const json = (response: Response) => Effect.promise(() => response.json() as Promise<any>)
const bytes = (response: Response) => Effect.promise(async () => new Uint8Array(await response.arrayBuffer()))

const documentOf = (server: Server) => Effect.flatMap(call(server, "/openapi.json"), json)

/** The media-type example of an operation's response (or of its request body, `status` "request"). */
const exampleOf = (document: any, path: string, method: string, status: string) => {
  const operation = document.paths[path][method]
  const content = status === "request" ? operation.requestBody.content : operation.responses[status].content
  const example = content["application/json"].example
  expect(example, `${method} ${path} ${status}`).toBeDefined()
  return example
}

describe("the OpenAPI document as the docs page uses it", () => {
  it.scoped("lists first the server it is read from, then production and staging", () =>
    Effect.gen(function*() {
      const document = yield* documentOf(yield* makeServer)
      expect(document.servers[0]).toEqual({ url: BASE_PATH, description: "This server" })
      expect(document.servers.slice(1).map((server: any) => server.description)).toEqual([
        "Production deployment",
        "Staging deployment"
      ])
    }))

  it.scoped("makes the bearer key the document's security, and the page preselects it", () =>
    Effect.gen(function*() {
      const server = yield* makeServer
      expect((yield* documentOf(server)).security).toEqual([{ bearerAuth: [] }])
      const html = yield* Effect.promise(() => server.fetch("/docs").then((response) => response.text()))
      expect(html).toMatch(/"preferredSecurityScheme":\s*"bearerAuth"/)
    }))

  it.scoped("has schema examples that the schemas accept", () =>
    Effect.gen(function*() {
      const { components } = yield* documentOf(yield* makeServer)
      for (
        const [name, schema] of [
          ["NewPet", NewPet],
          ["Pet", Pet],
          ["Pets", Pets],
          ["Changes", Changes],
          ["Error", ErrorBody]
        ] as const
      ) {
        const examples = components.schemas[name].examples
        expect(examples, name).toHaveLength(1)
        expect(() => Schema.decodeUnknownSync(schema as Schema.Schema<unknown, unknown>)(examples[0])).not.toThrow()
      }
    }))

  it.scoped("has a createPet example that the service accepts, answered as the 201 example says", () =>
    Effect.gen(function*() {
      const server = yield* makeServer
      const document = yield* documentOf(server)
      const request = exampleOf(document, "/pets", "post", "request")
      const response = yield* call(
        server,
        "/v1/pets",
        authorized(server.key, { method: "POST", body: JSON.stringify(request) })
      )
      expect(response.status).toBe(201)
      const created = yield* json(response)
      expect({ ...created, id: 1 }).toEqual(exampleOf(document, "/pets", "post", "201"))
      // The list and get examples are the shape the service answers with.
      expect(Schema.decodeUnknownSync(Pets)(exampleOf(document, "/pets", "get", "200"))).toHaveLength(2)
      expect(Schema.decodeUnknownSync(Pet)(exampleOf(document, "/pets/{petId}", "get", "200"))).toBeDefined()
      // The parameters' examples are a query and a path the service answers with that pet.
      const example = (path: string, name: string) =>
        document.paths[path].get.parameters.find((parameter: any) => parameter.name === name).schema.examples[0]
      const fetched = yield* call(server, `/v1/pets/${example("/pets/{petId}", "petId")}`, authorized(server.key))
      expect(yield* json(fetched)).toEqual(created)
      const query = `limit=${example("/pets", "limit")}&status=${example("/pets", "status")}`
      expect(yield* json(yield* call(server, `/v1/pets?${query}`, authorized(server.key)))).toEqual([created])
    }))

  it.scoped("has error examples that are the answers the service gives", () =>
    Effect.gen(function*() {
      const server = yield* makeServer
      const document = yield* documentOf(server)
      const post = (body: string, contentType = "application/json") =>
        authorized(server.key, { method: "POST", body, headers: { "content-type": contentType } })
      const cases: ReadonlyArray<readonly [string, string, string, string, RequestInit?]> = [
        ["/pets", "get", "400", "/v1/pets?limit=500", authorized(server.key)],
        ["/pets", "get", "401", "/v1/pets"],
        ["/pets", "post", "400", "/v1/pets", post(JSON.stringify({ name: "", categoryId: 1 }))],
        ["/pets", "post", "413", "/v1/pets", post(JSON.stringify({ name: "x".repeat(70_000), categoryId: 1 }))],
        ["/pets", "post", "415", "/v1/pets", post("x", "text/plain")],
        ["/pets/{petId}", "get", "400", "/v1/pets/abc", authorized(server.key)],
        ["/pets/{petId}", "get", "404", "/v1/pets/42", authorized(server.key)],
        ["/pets/changes", "get", "400", "/v1/pets/changes?wait=30", authorized(server.key)],
        ["/pets/changes", "get", "410", "/v1/pets/changes?after=nowhere.1", authorized(server.key)]
      ]
      for (const [path, method, status, target, init] of cases) {
        const response = yield* call(server, target, init)
        expect(response.status, `${method} ${target}`).toBe(Number(status))
        expect(yield* json(response)).toEqual(exampleOf(document, path, method, status))
      }
      // The one the tests cannot provoke here still has the Error shape, with its status.
      expect(exampleOf(document, "/pets", "get", "503")).toMatchObject({ code: "unavailable", status: 503 })
    }))
})

describe("/ and /docs", () => {
  it.scoped("/ leads to /docs", () =>
    Effect.gen(function*() {
      const response = yield* call(yield* makeServer, "/", { redirect: "manual" })
      expect(response.status).toBe(302)
      expect(response.headers.get("location")).toBe("/docs")
    }))

  it.scoped("/docs is sent compressed when the browser accepts it, the same page either way", () =>
    Effect.gen(function*() {
      const server = yield* makeServer
      const plain = yield* call(server, "/docs")
      expect(plain.headers.get("content-encoding")).toBeNull()
      const page = yield* bytes(plain)
      expect(page.length).toBeGreaterThan(1_000_000)
      const brotli = yield* call(server, "/docs", { headers: { "accept-encoding": "gzip, deflate, br" } })
      expect(brotli.headers.get("content-encoding")).toBe("br")
      const compressed = yield* bytes(brotli)
      expect(compressed.length).toBeLessThan(page.length / 4)
      expect(brotliDecompressSync(compressed).equals(Buffer.from(page))).toBe(true)
      const gzip = yield* call(server, "/docs", { headers: { "accept-encoding": "gzip" } })
      expect(gzip.headers.get("content-encoding")).toBe("gzip")
      expect(gunzipSync(yield* bytes(gzip)).equals(Buffer.from(page))).toBe(true)
      for (const response of [plain, brotli, gzip]) expect(response.headers.get("vary")).toMatch(/accept-encoding/i)
    }))

  it.scoped("/docs has a validator: a browser with the current copy gets 304", () =>
    Effect.gen(function*() {
      const server = yield* makeServer
      const first = yield* call(server, "/docs", { headers: { "accept-encoding": "br" } })
      const etag = first.headers.get("etag")
      expect(etag).toMatch(/^"[^"]+"$/)
      const again = yield* call(server, "/docs", { headers: { "accept-encoding": "br", "if-none-match": etag! } })
      expect(again.status).toBe(304)
      expect((yield* bytes(again)).length).toBe(0)
      // Another encoding is another representation, with another validator.
      const plain = yield* call(server, "/docs", { headers: { "if-none-match": etag! } })
      expect(plain.status).toBe(200)
      expect(plain.headers.get("etag")).not.toBe(etag)
    }))

  it.scoped("/docs may be kept and reused by a browser; the API's own answers stay no-store", () =>
    Effect.gen(function*() {
      expect(DOCS_CACHE_CONTROL).toMatch(/max-age=[1-9]/)
      expect(DOCS_CACHE_CONTROL).not.toMatch(/no-store|no-cache|private/)
      const server = yield* makeServer
      for (const encoding of ["br", "identity"]) {
        const docs = yield* call(server, "/docs", { headers: { "accept-encoding": encoding } })
        expect(docs.headers.get("cache-control")).toBe(DOCS_CACHE_CONTROL)
      }
      expect((yield* call(server, "/v1/pets", authorized(server.key))).headers.get("cache-control")).toBe("no-store")
      expect((yield* call(server, "/openapi.json")).headers.get("cache-control")).toBe("no-store")
    }))

  it("chooses Brotli, then gzip, and honours q=0", () => {
    expect(chooseEncoding(undefined)).toBe("identity")
    expect(chooseEncoding("gzip, deflate, br, zstd")).toBe("br")
    expect(chooseEncoding("gzip;q=1.0, br;q=0")).toBe("gzip")
    expect(chooseEncoding("*")).toBe("gzip")
    expect(chooseEncoding("identity")).toBe("identity")
    expect(chooseEncoding("gzip;q=0")).toBe("identity")
  })
})
