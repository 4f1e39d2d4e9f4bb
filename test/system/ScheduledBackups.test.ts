/**
 * The backups a server takes of itself, under load: `BACKUP_EVERY=300ms`, `BACKUP_KEEP=3`, while several connections
 * create pets. Every backup left passes `PRAGMA integrity_check`, there are exactly `BACKUP_KEEP` of them and no partial
 * file after the drain, `/metrics` says when the last one was written and that none failed, and a server started on
 * a copy of the newest serves every pet acknowledged before that backup began, as acknowledged.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { Option } from "effect"
import { copyFileSync, readdirSync } from "node:fs"
import { join } from "node:path"
import { startedAt } from "../../src/Database/ScheduledBackups.js"
import type { Pet } from "../../src/Domain/Pet.js"
import { createPet, STATUSES, walk } from "./support/api.js"
import { createKey, freePort, scratchDirectory, startPetstore, stopAll } from "./support/petstore.js"
import { Connection } from "./support/raw.js"
import { seedPets } from "./support/sqlite.js"

afterAll(stopAll)

const SEEDED = 50_000
const CREATORS = 4
const KEEP = 3

const metric = (text: string, name: string) => {
  const line = text.split("\n").find((line) => line.startsWith(`${name} `))
  return line === undefined ? undefined : Number(line.slice(name.length + 1))
}

describe("scheduled backups of a serving database", { timeout: 120_000 }, () => {
  it("are sound, kept to BACKUP_KEEP, reported on /metrics, and hold every pet acknowledged before they began", async () => {
    const directory = scratchDirectory()
    const database = join(directory, "petstore.db")
    const backups = join(directory, "backups")
    const { key } = createKey(database)
    seedPets(database, SEEDED)
    const metricsPort = await freePort()
    const server = await startPetstore({
      database,
      env: {
        BACKUP_EVERY: "300ms",
        BACKUP_KEEP: String(KEEP),
        BACKUP_DIR: backups,
        METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
        LOG_LEVEL: "info"
      }
    })

    /** Each pet acknowledged, with the time its 201 arrived. */
    const acknowledged = new Map<number, { readonly pet: Pet; readonly at: number }>()
    let stop = false
    const connections = await Promise.all(Array.from({ length: CREATORS }, () => Connection.open(server.port)))
    const creators = connections.map(async (connection, c) => {
      for (let i = 0; !stop; i++) {
        const pet = { name: `client ${c} pet ${i}`, categoryId: 1 + i % 100, status: STATUSES[(c + i) % 3] }
        const response = await createPet(connection, key, pet)
        expect(response.status, response.text).toBe(201)
        acknowledged.set(response.json.id, { pet: response.json, at: Date.now() })
      }
    })
    const written = () => server.output().split("\n").filter((line) => line.includes("\"backup written\"")).length
    // Load through several periods: more backups than are kept, so that old ones were removed.
    const deadline = Date.now() + 60_000
    while (written() < KEEP + 3 && Date.now() < deadline) await new Promise((done) => setTimeout(done, 50))
    stop = true
    await Promise.all(creators)
    for (const connection of connections) connection.close()

    const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((response) => response.text())
    expect(metric(metrics, "petstore_backup_failures_total")).toBe(0)
    const lastSuccess = metric(metrics, "petstore_backup_last_success_timestamp_seconds")!
    expect(lastSuccess * 1000).toBeGreaterThan(Date.now() - 10_000)
    expect(metric(metrics, "petstore_backup_duration_seconds")).toBeGreaterThan(0)

    expect(await server.kill("SIGTERM")).toEqual({ code: 0, signal: null })
    const output = server.output()
    expect(written(), output.slice(-3000)).toBeGreaterThanOrEqual(KEEP + 3)
    expect(output).not.toContain("\"backup failed\"")
    expect(output).toContain("\"removed\"")

    // Exactly BACKUP_KEEP backups, the newest, and nothing partial beside them.
    const names = readdirSync(backups).sort()
    expect(names).toHaveLength(KEEP)
    for (const name of names) expect(name).toMatch(/^petstore-\d{8}T\d{6}\.\d{3}Z\.db$/)
    const stored = new Map<string, Map<number, Pet>>()
    for (const name of names) {
      const db = new Database(join(backups, name), { readonly: true })
      expect(db.query("PRAGMA integrity_check").all(), name).toEqual([{ integrity_check: "ok" }])
      expect((db.query("SELECT count(*) AS n FROM pets WHERE id <= ?").get(SEEDED) as { n: number }).n).toBe(SEEDED)
      const pets = db.query("SELECT id, name, category_id AS categoryId, status FROM pets WHERE id > ?").all(SEEDED)
      stored.set(name, new Map((pets as Array<Pet>).map((pet) => [pet.id as number, pet])))
      db.close()
    }
    // One committed state each: the pets created over the API are a prefix of the ids, with no gap.
    for (const [name, pets] of stored) {
      const ids = [...pets.keys()].sort((a, b) => a - b)
      expect(ids, name).toEqual(ids.map((_, i) => SEEDED + 1 + i))
    }

    // A server started on a copy of the newest serves every pet acknowledged before that backup began, as acknowledged.
    const newest = names[names.length - 1]
    const began = Option.getOrThrow(startedAt(newest))
    const before = [...acknowledged.values()].filter(({ at }) => at < began).map(({ pet }) => pet)
    expect(before.length).toBeGreaterThan(0)
    const restored = join(directory, "restored.db")
    copyFileSync(join(backups, newest), restored)
    const onBackup = await startPetstore({ database: restored, env: { LOG_LEVEL: "warning" } })
    const served = new Map((await walk(onBackup.port, key, `limit=100&after=${SEEDED}`)).map((pet) => [pet.id, pet]))
    for (const pet of before) expect(served.get(pet.id), `pet ${pet.id}`).toEqual(pet)
    expect(served.size).toBe(stored.get(newest)!.size)
    expect(await onBackup.kill("SIGTERM")).toEqual({ code: 0, signal: null })
  })
})
