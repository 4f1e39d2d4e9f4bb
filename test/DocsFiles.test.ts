/**
 * The written docs stay true to the repository: every relative link of the README, `docs/` and `bench/README.md`
 * leads to a file (and a heading) that exists, every repository path they name in code spans exists (the benches'
 * output aside), and `docs/` stays within its size (people read it whole; measurements go to `bench/results/`).
 */
import { describe, expect, it } from "@effect/vitest"
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, normalize } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))
const docs = readdirSync(join(root, "docs")).filter((name) => name.endsWith(".md")).map((name) => `docs/${name}`)
const pages = ["README.md", "bench/README.md", ...docs]
const read = (page: string) => readFileSync(join(root, page), "utf8")

/** The anchors of a page's headings, as GitHub makes them. */
const anchorsOf = (page: string) =>
  new Set(
    read(page).split("\n").filter((line) => line.startsWith("#")).map((line) =>
      line.replace(/^#+\s*/, "").trim().toLowerCase().replace(/[^\p{L}\p{N}\- _]/gu, "").replace(/ /g, "-")
    )
  )

describe("the docs", () => {
  it("link only to files and headings that exist", () => {
    const broken: Array<string> = []
    for (const page of pages) {
      for (const [, target] of read(page).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue
        const [path, anchor] = target!.split("#")
        const file = path === "" ? page : normalize(join(dirname(page), path!))
        if (!existsSync(join(root, file))) broken.push(`${page}: ${target}`)
        else if (anchor !== undefined && file.endsWith(".md") && !anchorsOf(file).has(anchor)) {
          broken.push(`${page}: ${target}`)
        }
      }
    }
    expect(broken).toEqual([])
  })

  it("name only repository paths that exist", () => {
    const missing: Array<string> = []
    for (const page of pages) {
      for (const [, path] of read(page).matchAll(/`((?:src|test|bench|scripts|ops)\/[\w./-]*[\w/])`/g)) {
        // What the benches write is not in the repository; the records there are linked, and checked above.
        if (path!.startsWith("bench/results/")) continue
        if (!existsSync(join(root, path!))) missing.push(`${page}: ${path}`)
      }
    }
    expect(missing).toEqual([])
  })

  it("are at most 72 KB in docs/", () => {
    const bytes = docs.reduce((sum, page) => sum + statSync(join(root, page)).size, 0)
    expect(bytes).toBeLessThanOrEqual(72_000)
  })
})
