/**
 * The catalogue every bench loads: pets inserted straight into a database petstore migrated (one transaction), and the
 * API key a bench sends, issued by petstore's own `keys create`.
 */
import { spawnSync } from "bun"
import { Database } from "bun:sqlite"

const STATUSES = ["available", "pending", "sold"] as const

/** Inserts `count` pets (ids 1 to `count`, 50 categories, the statuses in turn) and checkpoints the WAL. */
export const insertPets = (file: string, count: number): void => {
  const db = new Database(file)
  db.run("PRAGMA synchronous = OFF")
  const insert = db.prepare("INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?)")
  db.transaction(() => {
    for (let i = 1; i <= count; i++) insert.run(`pet ${i}`, (i % 50) + 1, STATUSES[i % 3])
  })()
  db.run("PRAGMA wal_checkpoint(TRUNCATE)")
  db.close()
}

/**
 * A new API key on the database at `file` (migrating it first, if new), issued by `petstore` — the command that runs
 * it, e.g. `["dist/petstore"]` or `["bun", "src/main.ts"]`.
 */
export const createKey = (petstore: ReadonlyArray<string>, file: string, name: string, cwd: string): string => {
  const made = spawnSync([...petstore, "keys", "create", "--name", name], {
    cwd,
    env: { ...process.env, DATABASE_URL: file, LOG_LEVEL: "error" },
    stdout: "pipe",
    stderr: "pipe"
  })
  if (made.exitCode !== 0) {
    throw new Error(`keys create failed (${made.exitCode}):\n${made.stdout.toString()}${made.stderr.toString()}`)
  }
  return made.stdout.toString().trim().split("\n").at(-1)!
}
