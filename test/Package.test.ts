/**
 * What `npm ci` needs to say nothing: every dependency's install script is either allowed or denied in package.json
 * (`allowScripts`, npm 11), and the Node versions are stated (`engines`).
 */
import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))
const pkg = JSON.parse(readFileSync(`${root}/package.json`, "utf8"))
const npmMajor = Number(spawnSync("npm", ["--version"], { encoding: "utf8" }).stdout?.split(".")[0])

describe("package.json", () => {
  it("states the Node versions it runs on", () => {
    expect(pkg.engines.node).toMatch(/\d/)
  })

  it.skipIf(!(npmMajor >= 11))("reviews every install script of the installed dependencies (bun's is allowed)", () => {
    const pending = spawnSync("npm", ["install-scripts", "ls"], { cwd: root, encoding: "utf8" })
    expect(pending.status).toBe(0)
    expect(pending.stdout).toContain("No packages with unreviewed install scripts.")
    expect(pkg.allowScripts.bun).toBe(true)
  })
})
