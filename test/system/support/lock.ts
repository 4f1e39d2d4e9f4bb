/**
 * Another process holding a SQLite database's write lock, as `sqlite3`'s `BEGIN IMMEDIATE` (or a `petstore keys`
 * command, a backup, a migration) does: a Bun child process with a `bun:sqlite` connection of its own.
 */
import { spawn } from "node:child_process"

export interface HeldLock {
  /** When the lock was taken (after `BEGIN IMMEDIATE` returned), in `Date.now()` time. */
  readonly lockedAt: number
  /** Resolves when the child has committed and exited. */
  readonly released: Promise<void>
}

const HOLDER = `
const { Database } = require("bun:sqlite")
const db = new Database(process.argv[1])
db.run("PRAGMA busy_timeout = 10000")
db.run("BEGIN IMMEDIATE")
console.log("locked")
setTimeout(() => { db.run("COMMIT"); db.close(); process.exit(0) }, Number(process.argv[2]))
`

/** Takes the write lock of `database` in another process for `ms` milliseconds; resolves once it is held. */
export const holdWriteLock = (database: string, ms: number): Promise<HeldLock> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["-e", HOLDER, database, String(ms)], {
      stdio: ["ignore", "pipe", "inherit"]
    })
    const released = new Promise<void>((done) => child.once("exit", () => done()))
    child.stdout!.once("data", () => resolve({ lockedAt: Date.now(), released }))
    child.once("exit", (code) => reject(new Error(`the lock holder exited with ${code} before locking`)))
  })
