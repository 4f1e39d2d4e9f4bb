/**
 * What an operator meets around the executable: its configuration from the environment alone (no `.env`, no
 * `bunfig.toml` from the working directory), one server per SQLite file whatever names it (and the lock gone with a
 * killed server), a failed start that leaves no database behind, the start line's docs URL, and what a user who may
 * only read the database can do.
 */
import { spawnSync } from "node:child_process"
import { chmodSync, readdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { otherNamesOf } from "../support/files.js"
import {
  createKey,
  freePort,
  run,
  runAlone,
  scratchDirectory,
  spawnPetstore,
  startPetstore,
  stopAll
} from "./support/petstore.js"

afterAll(stopAll)

/** A loopback port a server of the test holds until the test file ends. */
const busyPort = async () => {
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("someone else") })
  afterAll(() => server.stop(true))
  return server.port!
}

describe("the executable reads its configuration from the environment alone", () => {
  it("a .env and a bunfig.toml in the working directory change nothing", () => {
    const directory = scratchDirectory()
    // Were the .env read, keys list would fail on its LOG_LEVEL and its database; were bunfig.toml read, the preload
    // would print.
    writeFileSync(join(directory, ".env"), "LOG_LEVEL=loud\nDATABASE_URL=/nonexistent/dir/pets.db\nPORT=1\n")
    writeFileSync(join(directory, "preload.ts"), "process.stderr.write('PRELOADED\\n')\n")
    writeFileSync(join(directory, "bunfig.toml"), "preload = [\"./preload.ts\"]\n")
    const list = runAlone(["keys", "list"], {}, { cwd: directory })
    expect(list.stderr).toBe("")
    expect(list.status).toBe(0)
    expect(list.stdout).toMatch(/^ID\s+NAME\s+CREATED/)
  })
})

describe("one server per SQLite file", () => {
  it("a second serve on the same file refuses in one line, pointing to PostgreSQL; keys and backup work beside", async () => {
    const directory = scratchDirectory()
    const database = join(directory, "pets.db")
    const first = await startPetstore({ database })
    // The same file under other names: a symlink to it, one to its directory, a hard link in another directory.
    const names = otherNamesOf(database, directory, join(scratchDirectory(), "other"))
    for (
      const [path, real] of [
        [database, ""],
        [names.symlink, ` (the file ${database})`],
        [names.throughDirectory, ` (the file ${database})`],
        [names.hardLink, ""]
      ]
    ) {
      const second = spawnPetstore(["serve"], { HOST: "127.0.0.1", PORT: String(await freePort()), DATABASE_URL: path })
      expect((await second.exited).code).toBe(1)
      expect(second.output()).toBe(
        `petstore: another petstore process already serves the SQLite database ${path}${real}: one process serves ` +
          `a SQLite file, under whatever path or link. Stop that one first; to run several processes, store the ` +
          `catalogue in PostgreSQL (DATABASE_URL=postgres://…).\n`
      )
    }
    const { id } = createKey(database)
    expect(run(["keys", "list", "--database", database]).stdout).toContain(id)
    expect(run(["backup", join(directory, "copy.db"), "--database", database]).stdout.trim()).toBe(
      join(directory, "copy.db")
    )
    expect((await fetch(`${first.origin}/healthz`)).status).toBe(200)
    expect((await first.kill("SIGTERM")).code).toBe(0)
  })

  it("two servers started at once on a new file: one serves, the other is refused", async () => {
    const database = join(scratchDirectory(), "pets.db")
    const both = await Promise.all(
      [0, 1].map(async () =>
        spawnPetstore(["serve"], { HOST: "127.0.0.1", PORT: String(await freePort()), DATABASE_URL: database })
      )
    )
    const refused = await Promise.race(both.map(async (server) => ({ server, exit: await server.exited })))
    expect(refused.exit.code).toBe(1)
    expect(refused.server.output()).toContain("another petstore process already serves the SQLite database")
    const serving = both.find((server) => server !== refused.server)!
    while (!serving.output().includes("petstore is listening")) await new Promise((done) => setTimeout(done, 50))
    serving.child.kill("SIGTERM")
    expect((await serving.exited).code).toBe(0)
  })

  it("the lock goes with a server killed by SIGKILL: the next one starts", async () => {
    const database = join(scratchDirectory(), "pets.db")
    const first = await startPetstore({ database })
    expect((await first.kill("SIGKILL")).signal).toBe("SIGKILL")
    const next = await startPetstore({ database })
    expect((await fetch(`${next.origin}/healthz`)).status).toBe(200)
    expect((await next.kill("SIGTERM")).code).toBe(0)
  })
})

describe("a serve that fails to start on a new database path leaves nothing behind", () => {
  const cases: ReadonlyArray<readonly [string, () => Promise<Record<string, string>>]> = [
    ["a port in use", async () => ({ HOST: "127.0.0.1", PORT: String(await busyPort()) })],
    ["a HOST that does not resolve", async () => ({ HOST: "no-such-host.invalid", PORT: String(await freePort()) })],
    ["a bad setting checked at start", async () => ({ HOST: "127.0.0.1", RATE_LIMIT: "often" })]
  ]
  for (const [name, env] of cases) {
    it(name, async () => {
      const directory = scratchDirectory()
      const server = spawnPetstore(["serve"], { ...(await env()), DATABASE_URL: join(directory, "pets.db") })
      expect((await server.exited).code).toBe(1)
      expect(server.output()).toMatch(/^petstore: /)
      expect(readdirSync(directory)).toEqual([])
    })
  }
})

describe("the start line", () => {
  it("bound to every interface, names a docs URL a person can open: http://localhost:PORT/docs", async () => {
    const port = await freePort()
    const server = spawnPetstore(["serve"], {
      HOST: "0.0.0.0",
      PORT: String(port),
      DATABASE_URL: join(scratchDirectory(), "pets.db")
    })
    const deadline = Date.now() + 10_000
    while (!server.output().includes("petstore is listening") && Date.now() < deadline) {
      await new Promise((done) => setTimeout(done, 50))
    }
    const line = JSON.parse(server.output().split("\n").find((text) => text.includes("petstore is listening"))!)
    expect(line.annotations.docs).toBe(`http://localhost:${port}/docs`)
    expect(line.annotations.address).toBe(`http://0.0.0.0:${port}`)
    expect((await fetch(line.annotations.docs)).status).toBe(200)
    server.child.kill("SIGTERM")
    expect((await server.exited).code).toBe(0)
  })
})

// Permissions matter only to a user that is not root: as root, the reader is `nobody`.
const isRoot = process.getuid?.() === 0
const hasSetpriv = spawnSync("setpriv", ["--version"]).status === 0
describe.skipIf(isRoot && !hasSetpriv)("a user who may read the database but not write it", () => {
  /** A database with a key, in a directory the reader can enter but not write; the file readable, not writable. */
  const readOnlyDatabase = () => {
    const directory = scratchDirectory()
    const database = join(directory, "pets.db")
    const { id } = createKey(database)
    chmodSync(database, 0o444)
    chmodSync(directory, isRoot ? 0o755 : 0o555)
    return { directory, database, id }
  }
  const reader = isRoot ? { as: 65534 } : {}
  const writable = () => {
    const directory = scratchDirectory()
    chmodSync(directory, 0o777)
    return directory
  }

  it("with no server running, keys list and backup say what access reading needs, in one line", () => {
    const { database, directory } = readOnlyDatabase()
    for (
      const [args, start] of [
        [["keys", "list"], `petstore: DATABASE_URL names the SQLite database ${database}, which cannot be opened: `],
        [["backup", join(writable(), "copy.db")], `petstore: cannot read the database ${database}: `]
      ] as const
    ) {
      const result = runAlone(args, { DATABASE_URL: database }, { ...reader, cwd: directory })
      expect(result.status).toBe(1)
      expect(result.stdout).toBe("")
      expect(result.stderr.trimEnd().split("\n")).toHaveLength(1)
      expect(result.stderr.startsWith(start)).toBe(true)
      expect(result.stderr).toContain(
        "may read it, but SQLite reads a database in WAL mode through its pets.db-wal and pets.db-shm files"
      )
      expect(result.stderr).toContain(`write access to ${directory}`)
    }
  })

  it("while a server runs, read access is enough: keys list lists the keys, backup copies", async () => {
    const { database, directory, id } = readOnlyDatabase()
    chmodSync(database, 0o644)
    if (!isRoot) chmodSync(directory, 0o755)
    const server = await startPetstore({ database })
    if (!isRoot) chmodSync(directory, 0o555)
    const list = runAlone(["keys", "list"], { DATABASE_URL: database }, { ...reader, cwd: directory })
    expect(list.stderr).toBe("")
    expect(list.status).toBe(0)
    expect(list.stdout).toContain(id)
    const copy = join(writable(), "copy.db")
    const backup = runAlone(["backup", copy], { DATABASE_URL: database }, { ...reader, cwd: directory })
    expect(backup.status).toBe(0)
    expect(backup.stdout.trim()).toBe(copy)
    if (!isRoot) chmodSync(directory, 0o755)
    expect((await server.kill("SIGTERM")).code).toBe(0)
  })
})
