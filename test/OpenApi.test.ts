/**
 * The OpenAPI document generated from the `HttpApi` declaration: the names, shapes and constraints the interface and the
 * contract fix. The document is checked in its wire form (through JSON), as `/openapi.json` and `petstore openapi` give it.
 */
import { describe, expect, it } from "@effect/vitest"
import { openApiDocument } from "../src/Api.js"

// Not the defaults of the configuration: the servers must come from the argument.
const servers = {
  production: "https://prod.pets.test/v1",
  staging: "https://stage.pets.test/v1"
}

type Json = any

const doc: Json = JSON.parse(JSON.stringify(openApiDocument(servers)))

const ERROR_REF = "#/components/schemas/Error"

const operation = (path: string, method: string): Json => {
  const op = doc.paths?.[path]?.[method]
  expect(op, `${method.toUpperCase()} ${path}`).toBeDefined()
  return op
}

const listPets = () => operation("/pets", "get")
const createPet = () => operation("/pets", "post")
const getPet = () => operation("/pets/{petId}", "get")
const listPetChanges = () => operation("/pets/changes", "get")

/** Follows a local `$ref` (`#/components/...`), or an `allOf` of one, to the schema it names. */
const resolve = (schema: Json): Json => {
  if (schema?.$ref !== undefined) {
    const ref: string = schema.$ref
    expect(ref.startsWith("#/")).toBe(true)
    return resolve(ref.slice(2).split("/").reduce((node: Json, key) => node?.[key], doc))
  }
  if (Array.isArray(schema?.allOf) && schema.allOf.length === 1) return { ...resolve(schema.allOf[0]), ...schema }
  return schema
}

const parameter = (op: Json, name: string, location: string): Json => {
  const found = (op.parameters ?? []).filter((p: Json) => p.name === name && p.in === location)
  expect(found, `parameter ${location} ${name}`).toHaveLength(1)
  return found[0]
}

describe("OpenAPI document", () => {
  it("is OpenAPI 3.1 for interface version 1.0.0", () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/)
    expect(doc.info.version).toBe("1.0.0")
    expect(doc.info.title).toBeTypeOf("string")
  })

  it("lists this server (relative), then the production and the staging servers it is given, each ending in /v1", () => {
    expect(doc.servers).toHaveLength(3)
    const [here, production, staging] = doc.servers
    expect(here).toEqual({ url: "/v1", description: "This server" })
    expect(production.url).toBe(servers.production)
    expect(staging.url).toBe(servers.staging)
    expect(production.description).toMatch(/production/i)
    expect(staging.description).toMatch(/staging/i)
    expect(production.description).not.toMatch(/staging/i)
    expect(staging.description).not.toMatch(/production/i)
    for (const server of doc.servers) expect(server.url).toMatch(/\/v1$/)
  })

  it("takes its servers from the argument", () => {
    const other: Json = openApiDocument({ production: "https://a.test/v1", staging: "https://b.test/v1" })
    expect(other.servers.map((s: Json) => s.url)).toEqual(["/v1", "https://a.test/v1", "https://b.test/v1"])
  })

  it("has exactly the four operations, relative to the servers", () => {
    expect(Object.keys(doc.paths).sort()).toEqual(["/pets", "/pets/changes", "/pets/{petId}"])
    expect(Object.keys(doc.paths["/pets"]).sort()).toEqual(["get", "post"])
    expect(Object.keys(doc.paths["/pets/{petId}"])).toEqual(["get"])
    expect(listPets().operationId).toBe("listPets")
    expect(createPet().operationId).toBe("createPet")
    expect(getPet().operationId).toBe("getPet")
    expect(Object.keys(doc.paths["/pets/changes"])).toEqual(["get"])
    expect(listPetChanges().operationId).toBe("listPetChanges")
  })

  it("flags getPet, and only getPet, deprecated", () => {
    expect(getPet().deprecated).toBe(true)
    expect(listPets().deprecated).not.toBe(true)
    expect(createPet().deprecated).not.toBe(true)
  })

  it("documents limit as an integer from 1 to 100, default 20", () => {
    const limit = parameter(listPets(), "limit", "query")
    expect(limit.required).toBe(false)
    const schema = resolve(limit.schema)
    expect(schema.type).toBe("integer")
    expect(schema.minimum).toBe(1)
    expect(schema.maximum).toBe(100)
    expect(schema.default).toBe(20)
  })

  it("documents the status filter as the PetStatus enumeration", () => {
    const status = parameter(listPets(), "status", "query")
    expect(status.required).toBe(false)
    const schema = resolve(status.schema)
    expect(schema.type).toBe("string")
    expect([...schema.enum].sort()).toEqual(["available", "pending", "sold"])
  })

  it("documents the after cursor as an optional integer", () => {
    const after = parameter(listPets(), "after", "query")
    expect(after.required).toBe(false)
    const schema = resolve(after.schema)
    expect(schema.type).toBe("integer")
    expect(schema.minimum).toBe(1)
  })

  it("documents petId as a required int64 path parameter", () => {
    const petId = parameter(getPet(), "petId", "path")
    expect(petId.required).toBe(true)
    const schema = resolve(petId.schema)
    expect(schema.type).toBe("integer")
    expect(schema.format).toBe("int64")
  })

  it("declares the responses of each operation", () => {
    expect(Object.keys(listPets().responses).sort()).toEqual(["200", "400", "401", "429", "503"])
    expect(Object.keys(createPet().responses).sort()).toEqual([
      "201",
      "400",
      "401",
      "409",
      "413",
      "415",
      "422",
      "429",
      "503"
    ])
    expect(Object.keys(getPet().responses).sort()).toEqual(["200", "400", "401", "404", "429", "503"])
    expect(Object.keys(listPetChanges().responses).sort()).toEqual(["200", "400", "401", "410", "429", "503"])
  })

  it("refers every error response to the Error schema", () => {
    const declared: Array<[Json, ReadonlyArray<string>]> = [
      [listPets(), ["400", "401", "429", "503"]],
      [createPet(), ["400", "401", "409", "413", "415", "422", "429", "503"]],
      [getPet(), ["400", "401", "404", "429", "503"]],
      [listPetChanges(), ["400", "401", "410", "429", "503"]]
    ]
    for (const [op, statuses] of declared) {
      for (const status of statuses) {
        const response = op.responses[status]
        expect(response, `${op.operationId} ${status}`).toBeDefined()
        expect(response.description, `${op.operationId} ${status}`).toMatch(/\S/)
        expect(Object.keys(response.content), `${op.operationId} ${status}`).toEqual(["application/json"])
        const body = response.content["application/json"]
        expect(body.schema, `${op.operationId} ${status}`).toEqual({ $ref: ERROR_REF })
        // Its example is an Error with the response's status (test/Docs.test.ts checks it is the service's answer).
        expect(Object.keys(body.example).sort(), `${op.operationId} ${status}`).toEqual(["code", "message", "status"])
        expect(body.example.status, `${op.operationId} ${status}`).toBe(Number(status))
      }
    }
  })

  it("returns pets as Pet: a bare array of them from listPets, one from createPet and getPet", () => {
    const list = listPets().responses["200"].content["application/json"].schema
    const array = resolve(list)
    expect(array.type).toBe("array")
    expect(array.items).toEqual({ $ref: "#/components/schemas/Pet" })
    expect(createPet().responses["201"].content["application/json"].schema).toEqual({
      $ref: "#/components/schemas/Pet"
    })
    expect(getPet().responses["200"].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/Pet" })
    expect(createPet().requestBody.required).toBe(true)
    expect(createPet().requestBody.content["application/json"].schema).toEqual({
      $ref: "#/components/schemas/NewPet"
    })
  })

  it("names its schemas as the contract does, without the generic decode-error schemas", () => {
    const names = Object.keys(doc.components.schemas)
    for (const name of ["Pet", "NewPet", "PetStatus", "Error"]) expect(names).toContain(name)
    expect(names).not.toContain("HttpApiDecodeError")
    expect(names).not.toContain("Issue")
    expect(names).not.toContain("PropertyKey")
  })

  it("defines Error as code, message and status, all required", () => {
    const error = doc.components.schemas.Error
    expect(error.type).toBe("object")
    expect([...error.required].sort()).toEqual(["code", "message", "status"])
    expect(error.properties.code.type).toBe("string")
    expect(error.properties.message.type).toBe("string")
    expect(error.properties.status.type).toBe("integer")
  })

  it("defines PetStatus as available, pending, sold", () => {
    const status = doc.components.schemas.PetStatus
    expect(status.type).toBe("string")
    expect(status.enum).toEqual(["available", "pending", "sold"])
  })

  it("requires name and categoryId of a NewPet, and defaults its status to available", () => {
    const newPet = doc.components.schemas.NewPet
    expect([...newPet.required].sort()).toEqual(["categoryId", "name"])
    expect(newPet.properties.id).toBeUndefined()
    const status = newPet.properties.status
    expect(status.default).toBe("available")
    expect(resolve(status).enum).toEqual(["available", "pending", "sold"])
    expect(newPet.properties.categoryId).toMatchObject({ type: "integer", format: "int64" })
    expect(newPet.properties.name.type).toBe("string")
  })

  it("requires id, name, categoryId and status of a Pet", () => {
    const pet = doc.components.schemas.Pet
    expect([...pet.required].sort()).toEqual(["categoryId", "id", "name", "status"])
    expect(pet.properties.id).toMatchObject({ type: "integer", format: "int64" })
    expect(pet.properties.categoryId).toMatchObject({ type: "integer", format: "int64" })
    expect(pet.properties.status).toEqual({ $ref: "#/components/schemas/PetStatus" })
  })

  it("requires the bearer API key on every operation", () => {
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" })
    for (const op of [listPets(), createPet(), getPet(), listPetChanges()]) {
      expect(op.security, op.operationId).toEqual([{ bearerAuth: [] }])
      expect(op.responses["401"], op.operationId).toBeDefined()
    }
  })

  it("documents the response headers", () => {
    expect(Object.keys(listPets().responses["200"].headers ?? {})).toContain("Link")
    expect(Object.keys(listPets().responses["200"].headers ?? {})).toContain("Feed-Position")
    expect(Object.keys(createPet().responses["201"].headers ?? {})).toContain("Location")
    const deprecated = Object.keys(getPet().responses["200"].headers ?? {})
    expect(deprecated).toContain("Deprecation")
    expect(deprecated).toContain("Sunset")
    expect(deprecated).toContain("Link")
    for (const op of [listPets(), createPet(), getPet(), listPetChanges()]) {
      expect(Object.keys(op.responses["401"].headers ?? {}), op.operationId).toContain("WWW-Authenticate")
    }
    for (const op of [listPets(), createPet(), getPet(), listPetChanges()]) {
      for (const [status, response] of Object.entries<Json>(op.responses)) {
        const headers = Object.keys(response.headers ?? {})
        if (status !== "401") {
          expect(headers, `${op.operationId} ${status}`).toEqual(
            expect.arrayContaining(["RateLimit-Policy", "RateLimit"])
          )
        }
        if (status === "429" || status === "503") {
          expect(headers, `${op.operationId} ${status}`).toContain("Retry-After")
        }
      }
    }
    expect(Object.keys(createPet().responses["201"].headers)).toContain("Idempotent-Replayed")
    expect(Object.keys(createPet().responses["409"].headers)).toContain("Retry-After")
    for (const [name, header] of Object.entries<Json>(getPet().responses["200"].headers)) {
      expect(header.description, name).toMatch(/\S/)
      expect(header.schema, name).toEqual({ type: "string" })
    }
  })

  it("declares the optional Idempotency-Key header on createPet, and no other operation", () => {
    const header = parameter(createPet(), "Idempotency-Key", "header")
    expect(header.required).not.toBe(true)
    expect(resolve(header.schema)).toMatchObject({ type: "string", minLength: 1 })
    for (const op of [listPets(), getPet()]) {
      expect((op.parameters ?? []).filter((p: Json) => p.in === "header"), op.operationId).toEqual([])
    }
  })

  it("declares the change feed's two media types and its optional Last-Event-ID header", () => {
    expect(Object.keys(listPetChanges().responses["200"].content).sort()).toEqual([
      "application/json",
      "text/event-stream"
    ])
    expect(listPetChanges().responses["200"].content["text/event-stream"].example).toMatch(/^retry: \d+\n\nid: /)
    expect(parameter(listPetChanges(), "Last-Event-ID", "header").required).not.toBe(true)
    expect(listPetChanges().responses["429"]).toBeDefined()
  })

  it("names the idempotency and rate-limit errors' statuses", () => {
    expect(createPet().responses["409"].description).toMatch(/Idempotency-Key/)
    expect(createPet().responses["422"].description).toMatch(/Idempotency-Key/)
    expect(listPets().responses["429"].description).toMatch(/quota/)
  })
})
