/**
 * `petstore backup` of a live database, and `petstore restore` of what it wrote. A server on a catalogue of a million
 * pets takes creates from several connections and lists from another; in the middle, `petstore backup` runs as its
 * own process. While it runs the server keeps answering both. The snapshot opens, passes `PRAGMA integrity_check` and
 * holds every pet acknowledged before the backup started; a server started on it serves them to the same API key.
 * `petstore restore` refuses while the server holds the database, and once it is stopped, puts the snapshot in place:
 * a server started again serves the snapshot's pets and none of those created after the backup.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { join } from "node:path"
import type { Pet } from "../../src/Domain/Pet.js"
import { createPet, listPets, STATUSES, walk } from "./support/api.js"
import { createKey, scratchDirectory, spawnPetstore, startPetstore, stopAll } from "./support/petstore.js"
import { Connection } from "./support/raw.js"
import { seedPets } from "./support/sqlite.js"

afterAll(stopAll)

const SEEDED = 1_000_000
const CREATORS = 4

/** A command of the executable run to its end: exit code, stdout alone, and stderr with it. */
const runToEnd = async (args: ReadonlyArray<string>, env: Record<string, string>) => {
  const spawned = spawnPetstore(args, env)
  let stdout = ""
  spawned.child.stdout!.on("data", (chunk) => stdout += chunk)
  const { code } = await spawned.exited
  return { code, stdout, output: spawned.output() }
}

describe("petstore backup of a serving database", { timeout: 120_000 }, () => {
  it("is one committed state with every acknowledged pet, served again with the same key, and restores", async () => {
    const directory = scratchDirectory()
    const database = join(directory, "petstore.db")
    const snapshot = join(directory, "backup.db")
    const { key } = createKey(database)
    seedPets(database, SEEDED)
    const server = await startPetstore({ database, env: { LOG_LEVEL: "warning" } })

    const acknowledged = new Map<number, Pet>()
    /** Names of the pets whose create was sent after the backup had finished. */
    const sentAfter = new Set<string>()
    let phase: "before" | "during" | "after" = "before"
    const answered = {
      before: { creates: 0, reads: 0 },
      during: { creates: 0, reads: 0 },
      after: { creates: 0, reads: 0 }
    }
    let stop = false
    const connections = await Promise.all(Array.from({ length: CREATORS + 1 }, () => Connection.open(server.port)))
    const creators = connections.slice(0, CREATORS).map(async (connection, c) => {
      for (let i = 0; !stop; i++) {
        const pet = { name: `client ${c} pet ${i}`, categoryId: 1 + i % 100, status: STATUSES[(c + i) % 3] }
        if (phase === "after") sentAfter.add(pet.name)
        const response = await createPet(connection, key, pet)
        expect(response.status, response.text).toBe(201)
        acknowledged.set(response.json.id, response.json)
        answered[phase].creates++
      }
    })
    const reader = (async () => {
      while (!stop) {
        const response = await listPets(connections[CREATORS], key, "/v1/pets?limit=20&status=sold")
        expect(response.status, response.text).toBe(200)
        answered[phase].reads++
      }
    })()

    while (acknowledged.size < 200) await new Promise((done) => setTimeout(done, 10))
    const beforeBackup = new Map(acknowledged)
    phase = "during"
    const backup = await runToEnd(["backup", snapshot], { DATABASE_URL: database })
    phase = "after"
    while (answered.after.creates < 50) await new Promise((done) => setTimeout(done, 10))
    stop = true
    await Promise.all([...creators, reader])
    for (const connection of connections) connection.close()

    expect(backup.code, backup.output).toBe(0)
    expect(backup.stdout).toBe(`${snapshot}\n`)
    expect(backup.output).toMatch(/Backed up .*: \d+ pets, [\d.]+ MB, in [\d.]+ m?s\./)
    // The server kept answering reads and creates while the backup ran.
    expect(answered.during.creates).toBeGreaterThan(0)
    expect(answered.during.reads).toBeGreaterThan(0)

    // The snapshot opens, is sound, and holds every pet acknowledged before the backup started, as acknowledged.
    const db = new Database(snapshot, { readonly: true })
    expect(db.query("PRAGMA integrity_check").all()).toEqual([{ integrity_check: "ok" }])
    const stored = new Map(
      (db.query("SELECT id, name, category_id AS categoryId, status FROM pets WHERE id > ?").all(SEEDED) as Array<Pet>)
        .map((pet) => [pet.id as number, pet])
    )
    expect((db.query("SELECT count(*) AS n FROM pets WHERE id <= ?").get(SEEDED) as { n: number }).n).toBe(SEEDED)
    db.close()
    for (const [id, pet] of beforeBackup) expect(stored.get(id), `pet ${id}`).toEqual(pet)
    // One committed state: the pets in it are a prefix of the acknowledged ones, with no gap.
    const ids = [...stored.keys()].sort((a, b) => a - b)
    expect(ids).toEqual(ids.map((_, i) => SEEDED + 1 + i))

    // Restoring is refused while the server holds the database.
    const refused = await runToEnd(["restore", snapshot], { DATABASE_URL: database })
    expect(refused.code).toBe(1)
    expect(refused.stdout).toBe("")
    expect(refused.output).toContain("is open in another process (a server?): stop the service, then restore.")

    // A server started on the snapshot serves its pets to the same key.
    expect(await server.kill("SIGTERM")).toEqual({ code: 0, signal: null })
    const onSnapshot = await startPetstore({ database: snapshot, env: { LOG_LEVEL: "warning" } })
    const served = await walk(onSnapshot.port, key, `limit=100&after=${SEEDED}`)
    expect(served).toEqual(ids.map((id) => stored.get(id)))
    expect(await onSnapshot.kill("SIGTERM")).toEqual({ code: 0, signal: null })

    // With the server stopped, the snapshot is restored in place of the database: what came after it is gone.
    const restored = await runToEnd(["restore", snapshot], { DATABASE_URL: database })
    expect(restored.code, restored.output).toBe(0)
    expect(restored.stdout).toBe(`${database}\n`)
    const again = await startPetstore({ database, env: { LOG_LEVEL: "warning" } })
    const after = await walk(again.port, key, `limit=100&after=${SEEDED}`)
    expect(after).toEqual(served)
    expect(after.filter((pet) => sentAfter.has(pet.name))).toEqual([])
    expect(sentAfter.size).toBeGreaterThan(0)
    await again.kill("SIGTERM")
  })
})
