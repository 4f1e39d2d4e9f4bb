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
  it("states the Node versions it runs on: the lowest of each range it names is accepted by every installed package", () => {
    const range: string = pkg.engines.node
    // `^20.19.0 || >=24` → 20.19.0 and 24.0.0: where each range starts. Packages' ranges are open upwards.
    const lowest = range.split("||").map((part) => {
      const [major, minor = "0", patch = "0"] = part.trim().replace(/^[\^~>=\s]+/, "").split(".")
      return `${major}.${minor}.${patch}`
    })
    expect(lowest.length).toBeGreaterThan(0)
    for (const version of lowest) expect(Bun.semver.satisfies(version, range), `${version} in ${range}`).toBe(true)
    const lock = JSON.parse(readFileSync(`${root}/package-lock.json`, "utf8"))
    const refusing = Object.entries(lock.packages as Record<string, { engines?: { node?: string } }>).flatMap((
      [path, entry]
    ) =>
      lowest.filter((version) =>
        entry.engines?.node !== undefined && !Bun.semver.satisfies(version, entry.engines.node)
      )
        .map((version) => `${path || "petstore"} (${entry.engines!.node}) refuses Node ${version}`)
    )
    expect(refusing).toEqual([])
  })

  it.skipIf(!(npmMajor >= 11))("reviews every install script of the installed dependencies (bun's is allowed)", () => {
    const pending = spawnSync("npm", ["install-scripts", "ls"], { cwd: root, encoding: "utf8" })
    expect(pending.status).toBe(0)
    expect(pending.stdout).toContain("No packages with unreviewed install scripts.")
    expect(pkg.allowScripts.bun).toBe(true)
  })
})
