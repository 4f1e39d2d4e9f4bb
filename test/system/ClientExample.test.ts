/**
 * The README's client example, exactly as written there, run with Bun from the repository's root against the
 * executable: it must create a pet, read a page and stream every available pet; with a wrong key, say so in one line.
 */
import { spawnSync } from "node:child_process"
import { readFileSync, rmSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { afterAll, expect, it } from "vitest"
import { createKey, scratchDirectory, startPetstore, stopAll } from "./support/petstore.js"

afterAll(stopAll)

const root = resolve(import.meta.dirname, "../..")

/** The first TypeScript block of the README's "Typed client" section. */
const readmeExample = () => {
  const readme = readFileSync(join(root, "README.md"), "utf8")
  const section = readme.slice(readme.indexOf("## Typed client"))
  const block = /```ts\n([\s\S]*?)```/.exec(section)?.[1]
  if (block === undefined) throw new Error("README.md has no ts block under '## Typed client'")
  return block
}

/** Runs the example with this key against this server. */
const runExample = (key: string, origin: string) => {
  // At the root, as the README says, so that `./src/Client.js` and the packages resolve as they do for a reader.
  const example = join(root, `client-example.${process.pid}.ts`)
  writeFileSync(example, readmeExample())
  try {
    return spawnSync(process.execPath, [example], {
      cwd: root,
      env: { PATH: process.env.PATH ?? "", API_KEY: key, PETSTORE_URL: `${origin}/v1` },
      encoding: "utf8",
      timeout: 60_000
    })
  } finally {
    rmSync(example, { force: true })
  }
}

it("the README's client example runs against the executable", async () => {
  const database = join(scratchDirectory(), "pets.db")
  const { key } = createKey(database)
  const server = await startPetstore({ database })
  const run = runExample(key, server.origin)
  expect(run.stderr).toBe("")
  expect(run.status).toBe(0)
  expect(run.stdout).toBe("created Rex with id 1\n1 pets on the first page\n1 available pets in all\n")

  // A wrong key: the declared error, handled, in one line, and a failed exit.
  const refused = runExample("psk_000000000000_wrong", server.origin)
  expect(refused.stdout).toBe("")
  expect(refused.stderr).toBe("petstore refused the key: The API key is not valid.\n")
  expect(refused.status).toBe(1)

  const listed = await fetch(`${server.origin}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
  expect(await listed.json()).toEqual([{ id: 1, name: "Rex", categoryId: 1, status: "available" }])
})
