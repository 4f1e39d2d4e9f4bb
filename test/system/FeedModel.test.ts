/**
 * The model of the change feed (`test/support/feedModel.ts`) on the compiled executable: on SQLite one server, on
 * PostgreSQL two replicas of one database. A drain is SIGTERM, the process left to exit, and a new one started on the
 * same port; a restart is SIGKILL and the same. Keys are revoked with `petstore keys revoke`, as an operator does; a
 * create that rolls back is `BEGIN`, the insert, a pause and `ROLLBACK` straight on the database. A few sequences run
 * here (`MODEL_RUNS` runs more); the same model runs in process in `npm test` (test/FeedModel.test.ts).
 */
import { afterAll, describe, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { join } from "node:path"
import { postgresOnly, withAdmin } from "../support/backends.js"
import { type Committed, type FeedSystem, runFeedModel } from "../support/feedModel.js"
import {
  createKey,
  type Petstore,
  scratchDirectory,
  spawnPetstore,
  startPetstore,
  stopAll
} from "./support/petstore.js"

afterAll(stopAll)

const SERVER_ENV = { LOG_LEVEL: "error", FEED_STREAMS_PER_KEY: "50" }
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))

/** The executable serving `database` as `replicas` servers; the database's own statements given by the backend. */
const executable = async (
  database: string,
  replicas: number,
  direct: Pick<FeedSystem, "rolledBack" | "committed">
): Promise<FeedSystem & { close: () => Promise<void> }> => {
  const keys = ["creator", "follower 1", "follower 2", "follower 3"].map((name) => createKey(database, name))
  const servers: Array<Petstore> = []
  // One after the other: the first migrates.
  for (let i = 0; i < replicas; i++) servers.push(await startPetstore({ database, env: SERVER_ENV }))
  const generations = servers.map(() => 0)
  const replace = async (replica: number, signal: NodeJS.Signals) => {
    const { port } = servers[replica]
    await servers[replica].kill(signal)
    generations[replica]++
    servers[replica] = await startPetstore({ database, env: SERVER_ENV, port })
  }
  return {
    replicas,
    keys: keys.map(({ key }) => key),
    generation: (replica) => generations[replica],
    fetch: (replica, path, init) => fetch(`${servers[replica].origin}${path}`, init),
    revoke: async (_, key) => {
      const { id } = keys.find((issued) => issued.key === key)!
      const revoking = spawnPetstore(["keys", "revoke", id, "--database", database], {})
      const { code } = await revoking.exited
      if (code !== 0) throw new Error(`petstore keys revoke exited with ${code}: ${revoking.output()}`)
    },
    drain: (replica) => replace(replica, "SIGTERM"),
    restart: (replica) => replace(replica, "SIGKILL"),
    ...direct,
    close: async () => {
      await Promise.all(servers.map((server) => server.kill("SIGKILL")))
    }
  }
}

const sqlite = async () => {
  const file = join(scratchDirectory(), "petstore.db")
  return executable(file, 1, {
    rolledBack: async (_, pet) => {
      const db = new Database(file)
      try {
        db.run("PRAGMA busy_timeout = 5000")
        db.run("BEGIN IMMEDIATE")
        db.query("INSERT INTO pets (name, category_id, status) VALUES (?, 1, ?)").run(pet.name, pet.status)
        await sleep(30)
        db.run("ROLLBACK")
      } finally {
        db.close()
      }
    },
    committed: async () => {
      const db = new Database(file, { readonly: true })
      try {
        return db.query<Committed, []>("SELECT id, id AS position, name, status FROM pets ORDER BY id").all()
      } finally {
        db.close()
      }
    }
  })
}

const SERVER_URL = process.env.TEST_DATABASE_URL
const ROLLED_BACK = "rolled back on purpose"

/** Two replicas on a fresh PostgreSQL database, dropped when the run closes. */
const postgres = async () => {
  const name = `model_${randomBytes(6).toString("hex")}`
  const url = new URL(SERVER_URL!)
  url.pathname = `/${name}`
  const database = url.href
  await Effect.runPromise(withAdmin(SERVER_URL!, (sql) => sql`CREATE DATABASE ${sql(name)}`))
  const system = await executable(database, 2, {
    rolledBack: (_, pet) =>
      Effect.runPromise(withAdmin(database, (sql) =>
        sql.withTransaction(
          sql`INSERT INTO pets (name, category_id, status) VALUES (${pet.name}, 1, ${pet.status})`.pipe(
            Effect.zipRight(Effect.sleep("30 millis")),
            Effect.zipRight(Effect.fail(ROLLED_BACK))
          )
        ).pipe(Effect.flip, Effect.flatMap((error) => error === ROLLED_BACK ? Effect.void : Effect.die(error))))),
    committed: () =>
      Effect.runPromise(withAdmin(database, (sql) =>
        Effect.map(
          sql<Committed>`SELECT id, position, name, status FROM pets ORDER BY position`,
          (rows) => rows.map((row) => ({ ...row, id: Number(row.id), position: Number(row.position) }))
        )))
  })
  return {
    ...system,
    close: async () => {
      await system.close()
      await Effect.runPromise(withAdmin(SERVER_URL!, (sql) => sql`DROP DATABASE IF EXISTS ${sql(name)} WITH (FORCE)`))
    }
  }
}

describe("the change feed's model on the executable", () => {
  it(
    "SQLite, one server drained and killed: every follower gets every pet it asked for once, in commit order",
    () => runFeedModel({ make: sqlite, replicas: 1, keys: 4, restarts: true, numRuns: 4 }),
    300_000
  )
})

describe.skipIf(SERVER_URL === undefined)(postgresOnly("the change feed's model on two replicas"), () => {
  it(
    "PostgreSQL, two replicas drained and killed: every follower on either gets what it asked for once, in order",
    () => runFeedModel({ make: postgres, replicas: 2, keys: 4, restarts: true, numRuns: 3 }),
    300_000
  )
})
