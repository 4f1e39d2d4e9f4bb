/**
 * The guide to adding an endpoint (`docs/extending.md`) is code that compiles and runs: each of its ```ts blocks is a
 * run of lines, indentation aside, of its example (`test/support/guide/DeletePet.ts`, type-checked with the suites) or
 * of this file, and the example, served by the engine beside the catalogue, answers its DELETE as the guide says.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { readFileSync } from "node:fs"
import { ApiKeys } from "../src/Auth/ApiKeys.js"
import { AuthorizationLive } from "../src/Auth/Http.js"
import * as Sql from "../src/Database/Sql.js"
import { Lifecycle } from "../src/Operations/Lifecycle.js"
import { PetsDependencies, registerPets } from "../src/Pets/Http.js"
import { PetsRepo } from "../src/Pets/Repo.js"
import { RegisteredGroups, registerGroup } from "../src/Serving/Registration.js"
import { WebHandler, webHandlerFrom } from "../src/Serving/WebHandler.js"
import { type Backend, describeBackends } from "./support/backends.js"
import { GuideApi, GuideRepo, registerDeletePet, ServedGuideApi } from "./support/guide/DeletePet.js"
import { authorized, clientFor, ORIGIN } from "./support/http.js"

const read = (path: string) => readFileSync(new URL(path, import.meta.url), "utf8")

/** The ```ts blocks of a Markdown page, each as its lines. */
const codeBlocks = (markdown: string) =>
  [...markdown.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map(([, body]) => body!.replace(/\n$/, "").split("\n"))

const indentOf = (line: string) => /^\s*/.exec(line)![0]

/** Whether `block` is a run of `lines`, each block line behind the same extra indentation (blank lines aside). */
const containsBlock = (lines: ReadonlyArray<string>, block: ReadonlyArray<string>) => {
  const base = Math.min(...block.filter((line) => line.trim() !== "").map((line) => indentOf(line).length))
  const dedented = block.map((line) => line.slice(base))
  return lines.some((_, start) => {
    const first = lines[start]!
    if (!first.endsWith(dedented[0]!)) return false
    const extra = first.slice(0, first.length - dedented[0]!.length)
    if (extra.trim() !== "") return false
    return dedented.every((line, i) =>
      line.trim() === "" ? lines[start + i]?.trim() === "" : lines[start + i] === extra + line
    )
  })
}

describe("the guide to adding an endpoint", () => {
  it("shows only code of its example or of this test", () => {
    const blocks = codeBlocks(read("../docs/extending.md"))
    expect(blocks.length).toBeGreaterThanOrEqual(4)
    const sources = [read("./support/guide/DeletePet.ts"), read("./Guide.test.ts")].map((text) => text.split("\n"))
    const strays = blocks.filter((block) => !sources.some((lines) => containsBlock(lines, block)))
    expect(strays.map((block) => block.join("\n"))).toEqual([])
  })
})

/**
 * The application's groups and the example's, served by the engine on a fresh database of the backend, with a client
 * of the API that has both: `testServer` of `test/support/http.ts`, for the example.
 */
const testServer = (backend: Backend) =>
  Effect.gen(function*() {
    const groups = Layer.scoped(
      RegisteredGroups,
      Effect.all([
        registerGroup(ServedGuideApi, "pets", registerPets),
        registerGroup(ServedGuideApi, "deletePet", registerDeletePet)
      ])
    ).pipe(Layer.provide([PetsDependencies, AuthorizationLive]))
    const context = yield* Layer.build(
      Layer.mergeAll(webHandlerFrom(groups, { corsOrigins: Option.none() }), ApiKeys.Default).pipe(
        Layer.provide([PetsRepo.Default, GuideRepo.Default, ApiKeys.Default]),
        Layer.provide(Lifecycle.Default),
        Layer.provide(Sql.layer(yield* backend.freshDatabase))
      )
    )
    const handler = Context.get(context, WebHandler)
    const key = Redacted.value((yield* Context.get(context, ApiKeys).create("guide")).key)
    const fetch = async (path: string, init?: RequestInit) => handler(new Request(`${ORIGIN}${path}`, init))
    const client = yield* clientFor(GuideApi, fetch, key)
    return { fetch, key, client }
  })

describeBackends((backend) => {
  it.scoped("deletePet removes a pet: 204 without a body, then 404", () =>
    Effect.gen(function*() {
      const server = yield* testServer(backend)
      const created = yield* server.client.createPet({
        headers: {},
        payload: { name: "Rex", categoryId: 1, status: "available" }
      })
      const response = yield* Effect.promise(() =>
        server.fetch(`/v1/pets/${created.id}`, authorized(server.key, { method: "DELETE" }))
      )
      expect(response.status).toBe(204)
      expect(yield* Effect.promise(() => response.text())).toBe("")
      const again = yield* Effect.flip(server.client.deletePet({ path: { petId: created.id } }))
      expect(again._tag).toBe("NotFound")
    }))
})
