/**
 * Two replicas, one catalogue: the compiled executable (`dist/petstore`, built by `npm run build`) run twice, on two
 * ports, against one fresh PostgreSQL database, the way an operator runs it behind a load balancer. Run with
 * `npm run test:system`; it needs `TEST_DATABASE_URL` (a server where it may create a database:
 * `scripts/pg-test-cluster.sh start` prints one) and is reported as skipped without it.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { ChildProcess } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { postgresOnly, withAdmin } from "../support/backends.js"
import { makeProxy } from "../support/proxy.js"
import { BINARY as BIN, freePort, spawnPetstore } from "./support/petstore.js"

const SERVER_URL = process.env.TEST_DATABASE_URL
const work = mkdtempSync(join(tmpdir(), "petstore-replicas-"))
const database = `replicas_${randomBytes(6).toString("hex")}`
const databaseUrl = (() => {
  if (SERVER_URL === undefined) return ""
  const url = new URL(SERVER_URL)
  url.pathname = `/${database}`
  return url.href
})()
const password = SERVER_URL === undefined ? "" : decodeURIComponent(new URL(SERVER_URL).password)

beforeAll(async () => {
  if (SERVER_URL === undefined) return
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: run npm run build first`)
  await Effect.runPromise(withAdmin(SERVER_URL, (sql) => sql`CREATE DATABASE ${sql(database)}`))
})

afterAll(async () => {
  if (SERVER_URL !== undefined) {
    await Effect.runPromise(withAdmin(SERVER_URL, (sql) => sql`DROP DATABASE IF EXISTS ${sql(database)} WITH (FORCE)`))
  }
  rmSync(work, { recursive: true, force: true })
})

interface Run {
  readonly child: ChildProcess
  /** Everything it wrote, stdout and stderr. */
  readonly output: () => string
  readonly exited: Promise<number | null>
}

const run = (args: ReadonlyArray<string>, env: Record<string, string>): Run => {
  const spawned = spawnPetstore(args, env, { cwd: work, inheritEnv: false })
  return { ...spawned, exited: spawned.exited.then(({ code }) => code) }
}

/** A CLI command to its end: its exit code and output. */
const cli = async (args: ReadonlyArray<string>, env: Record<string, string> = { DATABASE_URL: databaseUrl }) => {
  const command = run(args, env)
  const code = await command.exited
  return { code, output: command.output() }
}

interface Replica extends Run {
  readonly origin: string
  /** SIGTERM, and the exit code. */
  readonly stop: () => Promise<number | null>
}

const replicas: Array<Replica> = []
afterAll(async () => {
  await Promise.all(replicas.map((replica) => replica.stop()))
})

const startReplica = async (env: Record<string, string> = {}): Promise<Replica> => {
  const port = await freePort()
  const process_ = run(["serve"], { DATABASE_URL: databaseUrl, HOST: "127.0.0.1", PORT: String(port), ...env })
  const replica: Replica = {
    ...process_,
    origin: `http://127.0.0.1:${port}`,
    stop: async () => {
      if (process_.child.exitCode === null) process_.child.kill("SIGTERM")
      return process_.exited
    }
  }
  replicas.push(replica)
  return replica
}

const ready = async (replica: Replica) => {
  const started = Date.now()
  while (Date.now() - started < 30_000) {
    if (replica.child.exitCode !== null) throw new Error(`the replica exited:\n${replica.output()}`)
    const response = await fetch(`${replica.origin}/readyz`).catch(() => undefined)
    if (response?.status === 200) return
    await new Promise((done) => setTimeout(done, 100))
  }
  throw new Error(`the replica at ${replica.origin} was not ready within 30 s:\n${replica.output()}`)
}

const request = async (replica: Replica, path: string, key: string | undefined, body?: unknown) => {
  const response = await fetch(`${replica.origin}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: {
      ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
      ...(body === undefined ? {} : { "content-type": "application/json" })
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  return { status: response.status, headers: response.headers, body: await response.json() as any }
}

const issueKey = async (name: string) => {
  const { code, output } = await cli(["keys", "create", "--name", name])
  expect(code, output).toBe(0)
  const key = output.trim().split("\n").map((line) => line.trim()).filter((line) => line.startsWith("psk_")).at(-1)
  expect(key, output).toBeDefined()
  return { key: key!, id: key!.split("_")[1] }
}

interface Pet {
  readonly id: number
  readonly name: string
  readonly categoryId: number
  readonly status: string
}

describe.skipIf(SERVER_URL === undefined)(postgresOnly("two replicas on one PostgreSQL database"), () => {
  let a: Replica
  let b: Replica
  let key: string

  it("start at the same moment on an empty database: both migrate, neither fails", async () => {
    ;[a, b] = await Promise.all([startReplica(), startReplica()])
    await Promise.all([ready(a), ready(b)])
    // At the first attempt: the start-up retry would hide a race between the two migrations.
    for (const replica of [a, b]) expect(replica.output()).not.toContain("not ready yet")
    ;({ key } = await issueKey("system"))
  }, 60_000)

  it(
    "pets created through both at once get unique ids, and both list the same catalogue in the same order",
    async () => {
      const created = await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          request(i % 2 === 0 ? a : b, "/v1/pets", key, {
            name: `Pet ${i}`,
            categoryId: 1 + (i % 5),
            status: ["available", "pending", "sold"][i % 3]
          }))
      )
      for (const answer of created) {
        expect(answer.status).toBe(201)
        expect(typeof answer.body.id).toBe("number")
        expect(answer.headers.get("location")).toBe(`/v1/pets/${answer.body.id}`)
      }
      const pets = created.map((answer) => answer.body as Pet)
      expect(new Set(pets.map((pet) => pet.id)).size).toBe(60)

      const [fromA, fromB] = await Promise.all([a, b].map((replica) => request(replica, "/v1/pets?limit=100", key)))
      expect(fromA.body).toEqual(fromB.body)
      expect(fromA.body).toEqual([...pets].sort((x, y) => x.id - y.id))

      // Pages walked alternately through both replicas meet every pet once, in order.
      const walked: Array<Pet> = []
      let next: string | undefined = "/v1/pets?status=pending&limit=7"
      for (let i = 0; next !== undefined; i++) {
        const page = await request(i % 2 === 0 ? b : a, next, key)
        walked.push(...page.body)
        next = /^<([^>]+)>; rel="next"$/.exec(page.headers.get("link") ?? "")?.[1]
      }
      expect(walked).toEqual(fromA.body.filter((pet: Pet) => pet.status === "pending"))

      // A pet created through one replica is found through the other.
      const one = pets.find((pet) => pet.name === "Pet 0")!
      expect((await request(b, `/v1/pets/${one.id}`, key)).body).toEqual(one)
    },
    60_000
  )

  it("a key revoked with `petstore keys revoke` is refused by both replicas within a second", async () => {
    const doomed = await issueKey("doomed")
    for (const replica of [a, b]) expect((await request(replica, "/v1/pets?limit=1", doomed.key)).status).toBe(200)
    const revoked = await cli(["keys", "revoke", doomed.id])
    expect(revoked.code, revoked.output).toBe(0)
    const since = Date.now()
    for (const replica of [b, a]) {
      let status = 0
      while (Date.now() - since < 1_000) {
        status = (await request(replica, "/v1/pets?limit=1", doomed.key)).status
        if (status === 401) break
        await new Promise((done) => setTimeout(done, 50))
      }
      expect(status, `${replica.origin} still accepts the revoked key after 1 s`).toBe(401)
    }
    // The other key is untouched.
    expect((await request(a, "/v1/pets?limit=1", key)).status).toBe(200)
  }, 30_000)

  it(
    "while the database is unreachable a replica answers 503 within seconds, and recovers without a restart",
    async () => {
      const target = new URL(databaseUrl)
      await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
        const proxy = yield* makeProxy({ host: target.hostname, port: Number(target.port || 5432) })
        const through = new URL(databaseUrl)
        through.host = `127.0.0.1:${proxy.port}`
        const c = yield* Effect.promise(() =>
          startReplica({ DATABASE_URL: through.href, DB_CONNECT_TIMEOUT: "1 second", DB_QUERY_TIMEOUT: "1 second" })
        )
        yield* Effect.promise(() => ready(c))
        for (const mode of ["refuse", "blackhole"] as const) {
          yield* proxy.set(mode)
          for (const path of ["/readyz", "/v1/pets?limit=1"]) {
            const started = Date.now()
            const answer = yield* Effect.promise(() => request(c, path, key))
            expect([mode, path, answer.status, answer.body.code]).toEqual([mode, path, 503, "unavailable"])
            expect(Date.now() - started).toBeLessThan(4_000)
          }
          yield* proxy.set("open")
          yield* Effect.promise(() => ready(c))
          expect((yield* Effect.promise(() => request(c, "/v1/pets?limit=1", key))).status).toBe(200)
        }
        expect(yield* Effect.promise(() => c.stop())).toBe(0)
      })))
    },
    60_000
  )

  it("stop cleanly on SIGTERM, and never log the database password", async () => {
    for (const replica of [a, b]) {
      expect(await replica.stop()).toBe(0)
      expect(replica.output()).toContain("petstore is listening")
      expect(replica.output()).not.toContain(password)
    }
  }, 30_000)
})

describe.skipIf(SERVER_URL === undefined)(postgresOnly("start-up with PostgreSQL unreachable"), () => {
  it("retries for DB_STARTUP_TIMEOUT, then exits non-zero naming the host and not the password", async () => {
    const port = await freePort()
    const secret = `system-secret-${randomBytes(4).toString("hex")}`
    const started = Date.now()
    const { code, output } = await cli(["serve"], {
      DATABASE_URL: `postgres://petstore:${secret}@127.0.0.1:${port}/catalogue`,
      DB_STARTUP_TIMEOUT: "2 seconds",
      PORT: String(await freePort())
    })
    expect(code, output).not.toBe(0)
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_000)
    expect(Date.now() - started).toBeLessThan(15_000)
    expect(output).toContain(`127.0.0.1:${port}/catalogue`)
    expect(output).not.toContain(secret)
    expect(output).not.toContain("petstore is listening")
  }, 30_000)
})
