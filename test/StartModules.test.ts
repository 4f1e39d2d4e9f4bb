/**
 * What a start of the service loads, read from the module graph the bundler makes of `src/main.ts` (as `npm run build`
 * splits it into chunks): the chunks `petstore serve` imports statically are loaded at every start; the rest only
 * behind a dynamic import, when used. So an unconfigured service pays nothing for observability (of it only its
 * configuration and hooks load), nor for the command-line parser, the PostgreSQL driver or the reference page's
 * script; and no OpenTelemetry SDK package is bundled at all (`@effect/opentelemetry`'s OTLP modules need none).
 */
import { beforeAll, describe, expect, it } from "@effect/vitest"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))

let metafile: Bun.BuildMetafile
/** The modules of the chunks a start of `petstore serve` loads: main's and Serve's, and what they import statically. */
let atStart: ReadonlyArray<string>

beforeAll(async () => {
  const build = await Bun.build({
    entrypoints: [`${root}/src/main.ts`],
    root,
    target: "bun",
    format: "esm",
    splitting: true,
    metafile: true
  })
  expect(build.success).toBe(true)
  metafile = build.metafile!
  const outputs = metafile.outputs
  const chunkOf = (entry: string) => Object.keys(outputs).find((path) => outputs[path].entryPoint === entry)
  const loaded = new Set<string>()
  const load = (chunk: string) => {
    if (loaded.has(chunk)) return
    loaded.add(chunk)
    for (const imported of outputs[chunk].imports) if (imported.kind === "import-statement") load(imported.path)
  }
  for (const entry of ["src/main.ts", "src/Serve.ts"]) {
    const chunk = chunkOf(entry)
    expect(chunk, `a chunk of its own for ${entry}`).toBeDefined()
    load(chunk!)
  }
  atStart = [...loaded].flatMap((chunk) => Object.keys(outputs[chunk].inputs))
})

const fromPackage = (modules: ReadonlyArray<string>, name: string) =>
  modules.filter((module) => module.startsWith(`node_modules/${name}/`))

describe("the modules a start loads", () => {
  it("bundles no OpenTelemetry SDK package, and the OTLP modules of @effect/opentelemetry", () => {
    const modules = Object.keys(metafile.inputs)
    expect(fromPackage(modules, "@opentelemetry")).toEqual([])
    expect(fromPackage(modules, "@effect/opentelemetry")).toContain(
      "node_modules/@effect/opentelemetry/dist/esm/OtlpMetrics.js"
    )
  })

  it("loads of observability only its configuration and hooks when nothing is configured", () => {
    expect(atStart.filter((module) => module.startsWith("src/Observability/")).sort()).toEqual([
      "src/Observability/Config.ts",
      "src/Observability/Hooks.ts",
      "src/Observability/Live.ts"
    ])
    expect(fromPackage(atStart, "@effect/opentelemetry")).toEqual([])
  })

  it("loads the command-line parser, the PostgreSQL driver and the reference page's script only when used", () => {
    expect(atStart).not.toContain("src/Cli.ts")
    expect(fromPackage(atStart, "@effect/cli")).toEqual([])
    expect(fromPackage(atStart, "pg")).toEqual([])
    expect(fromPackage(atStart, "@effect/sql-pg")).toEqual([])
    // HttpApiScalar and the page's script (internal/httpApiScalar.js, about 3 MB).
    expect(atStart.filter((module) => /httpApiScalar\.js$/i.test(module))).toEqual([])
    // The reading of the graph itself: the server is in it.
    expect(atStart).toContain("src/Serving/Server.ts")
  })
})
