/**
 * The typed client (`src/Client.ts`): it compiles in a project that has only `effect` and `@effect/platform`, and it
 * does what a client of the service needs, against the application in-process (the README's example runs against the
 * executable in test/system/ClientExample.test.ts).
 */
import { FetchHttpClient } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Option, Stream } from "effect"
import { spawnSync } from "node:child_process"
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { makeClient, nextQuery } from "../src/Client.js"
import * as Sql from "../src/Database/Sql.js"
import { answeredBy, ORIGIN, testServerOn } from "./support/http.js"

const root = fileURLToPath(new URL("..", import.meta.url))
const CLIENT = join(root, "src/Client.ts")

/** The files a module needs, following its relative imports (type-only ones included), and the packages they name. */
const importGraph = (entry: string) => {
  const files = new Set<string>()
  const packages = new Set<string>()
  const visit = (file: string) => {
    if (files.has(file)) return
    files.add(file)
    const source = readFileSync(file, "utf8")
    for (const [, specifier] of source.matchAll(/(?:^|\n)\s*(?:import|export)\b[^"'`;]*?from\s+["']([^"']+)["']/g)) {
      if (specifier.startsWith(".")) visit(resolve(dirname(file), specifier.replace(/\.js$/, ".ts")))
      else {packages.add(
          specifier.startsWith("@") ? specifier.split("/").slice(0, 2).join("/") : specifier.split("/")[0]
        )}
    }
  }
  visit(entry)
  return { files: [...files], packages: [...packages].sort() }
}

const PLATFORM_DEPENDENCIES = Object.keys(
  JSON.parse(readFileSync(join(root, "node_modules/@effect/platform/package.json"), "utf8")).dependencies ?? {}
)

describe("the client module", () => {
  it("imports only effect and @effect/platform, directly or through the declarations", () => {
    const { files, packages } = importGraph(CLIENT)
    expect(packages).toEqual(["@effect/platform", "effect"])
    expect(files.map((file) => relative(root, file)).sort()).toContain("src/Api.ts")
  })

  it("compiles in a project whose only packages are effect and @effect/platform", { timeout: 120_000 }, () => {
    const project = mkdtempSync(join(tmpdir(), "petstore-client-"))
    try {
      for (const file of importGraph(CLIENT).files) {
        const target = join(project, relative(root, file))
        mkdirSync(dirname(target), { recursive: true })
        cpSync(file, target)
      }
      // The packages a `npm install effect @effect/platform` brings, and nothing else (no @effect/sql, no Bun types).
      for (const name of ["effect", "@effect/platform", ...PLATFORM_DEPENDENCIES]) {
        mkdirSync(dirname(join(project, "node_modules", name)), { recursive: true })
        symlinkSync(join(root, "node_modules", name), join(project, "node_modules", name), "dir")
      }
      writeFileSync(
        join(project, "tsconfig.json"),
        JSON.stringify({
          compilerOptions: {
            target: "ES2022",
            module: "ESNext",
            moduleResolution: "Bundler",
            lib: ["ES2022", "DOM"],
            types: [],
            strict: true,
            exactOptionalPropertyTypes: true,
            skipLibCheck: true,
            noEmit: true,
            preserveSymlinks: true
          },
          files: ["src/Client.ts"]
        })
      )
      const tsc = spawnSync(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", project], {
        cwd: project,
        encoding: "utf8"
      })
      expect(tsc.stdout + tsc.stderr).toBe("")
      expect(tsc.status).toBe(0)
    } finally {
      rmSync(project, { recursive: true, force: true })
    }
  })

  it("reads the next page's query from a Link header", () =>
    Effect.gen(function*() {
      expect(yield* nextQuery(undefined)).toEqual(Option.none())
      expect(yield* nextQuery(`</v1/pets?limit=2&status=sold&after=7>; rel="next"`)).toEqual(
        Option.some({ limit: 2, status: "sold", after: 7 })
      )
      expect(yield* nextQuery(`</v1/pets>; rel="successor-version"`)).toEqual(Option.none())
    }).pipe(Effect.runPromise))
})

describe("the client against the service", () => {
  /** The application in-process, and a client of it with the given key (the server's own by default). */
  const setUp = Effect.gen(function*() {
    const server = yield* testServerOn(Sql.SqlTest)
    const clientWith = (apiKey: string) =>
      makeClient({ baseUrl: `${ORIGIN}/v1`, apiKey }).pipe(answeredBy(server.fetch))
    return { server, client: yield* clientWith(server.key), clientWith }
  })

  it.scoped("creates a pet without a status (the service's default), then gets it by a plain number, and by the list", () =>
    Effect.gen(function*() {
      const { client } = yield* setUp
      const rex = yield* client.createPet({ name: "  Rex  ", categoryId: 1 })
      expect(rex).toEqual({ id: rex.id, name: "Rex", categoryId: 1, status: "available" })
      expect(yield* client.getPet(Number(rex.id))).toEqual(rex)
      expect((yield* Effect.flip(client.getPet(424242)))._tag).toBe("NotFound")
      // getPet's successor: the list filtered by id.
      const byId = yield* client.listPets({ id: Number(rex.id) })
      expect([byId.pets, byId.next]).toEqual([[rex], Option.none()])
      // Where the feed stood: just past Rex.
      expect(Option.getOrThrow(byId.position)).toMatch(/^[0-9a-f]{16}\.1$/)
      expect((yield* client.listPets({ id: 424242 })).pets).toEqual([])
    }))

  it.scoped("returns a page with the next page's query, and streams every pet across pages", () =>
    Effect.gen(function*() {
      const { client } = yield* setUp
      const created = []
      for (let i = 1; i <= 5; i++) {
        created.push(yield* client.createPet({ name: `Pet ${i}`, categoryId: 1, status: i % 2 ? "sold" : "pending" }))
      }
      const first = yield* client.listPets({ limit: 2 })
      expect(first.pets).toEqual(created.slice(0, 2))
      expect(first.next).toEqual(Option.some({ limit: 2, after: created[1].id }))
      const last = yield* client.listPets({ limit: 2, after: created[3].id })
      expect(last.pets).toEqual(created.slice(4))
      expect(last.next).toEqual(Option.none())
      expect(Chunk.toArray(yield* Stream.runCollect(client.allPets({ limit: 2 })))).toEqual(created)
      expect(Chunk.toArray(yield* Stream.runCollect(client.allPets({ limit: 1, status: "sold" })))).toEqual(
        created.filter((pet) => pet.status === "sold")
      )
    }))

  it.scoped("fails with the typed errors: a wrong key, a refused pet", () =>
    Effect.gen(function*() {
      const { client, clientWith } = yield* setUp
      const stranger = yield* clientWith("psk_000000000000_not-a-key")
      expect((yield* Effect.flip(stranger.listPets()))._tag).toBe("Unauthorized")
      expect((yield* Effect.flip(client.createPet({ name: "", categoryId: 1 })))._tag).toBe("ParseError")
    }))

  it.effect.each([
    ["http://127.0.0.1:1/v1", "connection refused: is petstore running at that address?"],
    ["http://no-such-host.invalid/v1", "name not resolved: is the host right?"]
  ])("a transport failure names its cause and the URL: %s", ([baseUrl, cause]) =>
    Effect.gen(function*() {
      const client = yield* makeClient({ baseUrl, apiKey: "psk_000000000000_not-a-key" })
      const error = yield* Effect.flip(client.listPets())
      expect(error.message).toBe(`Transport: ${cause} (GET ${baseUrl}/pets)`)
    }).pipe(Effect.provide(FetchHttpClient.layer)))
})
