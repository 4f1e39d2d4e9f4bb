/**
 * The command line as an operator meets it: `src/main.ts` run by Bun as a subprocess (`support/cli.ts`), judged by
 * exit code and output.
 */
import { assert, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn, spawnSync } from "node:child_process"
import { type AddressInfo, createServer } from "node:net"
import { describePostgres } from "./support/backends.js"
import { makePetstore, type Petstore, root, type Run } from "./support/cli.js"
import { tempDatabaseFile } from "./support/files.js"
import { API_KEY_FORMAT } from "./support/keys.js"

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

/** A port nothing listens on now. */
const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(port))
    })
  })

const lastLine = (text: string) => text.trimEnd().split("\n").at(-1) ?? ""

/** Issues a key with `keys create`: the id and secret parts of the key on the last line of stdout. */
const createKey = (petstore: Petstore, name: string) =>
  Effect.map(petstore(["keys", "create", "--name", name]), (created) => {
    expect(created.status).toBe(0)
    const match = API_KEY_FORMAT.exec(lastLine(created.stdout))
    assert(match !== null, `not a key: ${lastLine(created.stdout)}`)
    const [, id, secret] = match
    return { id, secret }
  })

/** The cells of the `keys list` row of a key: id, name, created, last used, revoked. */
const listedRow = (list: Run, id: string) => {
  const rows = list.stdout.split("\n").filter((line) => line.startsWith(`${id} `))
  expect(rows).toHaveLength(1)
  return rows[0].split(/\s+/)
}

describe("petstore command line", { timeout: 120_000 }, () => {
  it.scoped("keys create prints the key alone on the last line of stdout", () =>
    Effect.gen(function*() {
      const petstore = yield* makePetstore
      const created = yield* petstore(["keys", "create", "--name", "ci"])
      expect(created.status).toBe(0)
      expect(lastLine(created.stdout)).toMatch(API_KEY_FORMAT)
    }))

  it.scoped("keys create captured (stdout not a terminal): the note says the key went to stdout", () =>
    Effect.gen(function*() {
      const petstore = yield* makePetstore
      const created = yield* petstore(["keys", "create", "--name", "ci"])
      expect(created.status).toBe(0)
      expect(created.stderr.trimEnd().split("\n").at(-1)).toMatch(
        /^Created API key [0-9a-f]{12} \(ci\)\. The key was written to stdout and is shown only once: store it now\.$/
      )
    }))

  it.scoped("keys create on a terminal: the note ends with a colon, and the key follows it", () =>
    Effect.gen(function*() {
      const database = yield* tempDatabaseFile
      const terminal = spawnSync("script", [
        "-qec",
        `${process.execPath} src/main.ts keys create --name tty`,
        "/dev/null"
      ], {
        cwd: root,
        env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: database, LOG_FORMAT: "json" },
        encoding: "utf8",
        timeout: 30_000
      })
      expect(terminal.status).toBe(0)
      expect(terminal.stdout).toMatch(/\(tty\)\. It is shown once; store it now:\r?\npsk_[0-9a-f]{12}_/)
    }))

  it.scoped("keys list shows a key's id, name and times, never the key", () =>
    Effect.gen(function*() {
      const petstore = yield* makePetstore
      const { id, secret } = yield* createKey(petstore, "ci")
      const list = yield* petstore(["keys", "list"])
      expect(list.status).toBe(0)
      expect(list.stdout.split(/\s+/).slice(0, 7)).toEqual(["ID", "NAME", "CREATED", "LAST", "USED", "REVOKED", id])
      const [, name, created, lastUsed, revoked] = listedRow(list, id)
      expect(name).toBe("ci")
      expect(created).toMatch(ISO_TIME)
      expect(lastUsed).toBe("-")
      expect(revoked).toBe("-")
      expect(list.stdout + list.stderr).not.toContain(secret)
    }))

  it.scoped("keys revoke revokes the key, and keys list then shows when", () =>
    Effect.gen(function*() {
      const petstore = yield* makePetstore
      const { id } = yield* createKey(petstore, "ci")
      const revoke = yield* petstore(["keys", "revoke", id])
      expect(revoke.status).toBe(0)
      expect(revoke.stdout).toContain(id)
      const [, , created, , revoked] = listedRow(yield* petstore(["keys", "list"]), id)
      expect(revoked).toMatch(ISO_TIME)
      expect(Date.parse(revoked)).toBeGreaterThanOrEqual(Date.parse(created))
    }))

  it.scoped("keys revoke of an unknown or malformed id fails", () =>
    Effect.gen(function*() {
      const petstore = yield* makePetstore
      const unknown = yield* petstore(["keys", "revoke", "0123456789ab"])
      expect(unknown.status).not.toBe(0)
      expect(unknown.stdout + unknown.stderr).toContain("0123456789ab")
      const malformed = yield* petstore(["keys", "revoke", "not-a-key-id"])
      expect(malformed.status).not.toBe(0)
    }))

  it.scoped("openapi prints the OpenAPI 3.1 document with the configured servers", () =>
    Effect.gen(function*() {
      const petstore = yield* makePetstore
      const openapi = yield* petstore(["openapi"], {
        PUBLIC_URL: "https://pets.example.test/v1",
        STAGING_URL: "http://staging.pets.example.test/v1"
      })
      expect(openapi.status).toBe(0)
      const document = JSON.parse(openapi.stdout)
      expect(document.openapi).toBe("3.1.0")
      expect(document.info.version).toBe("1.0.0")
      const operationIds = Object.values(document.paths as Record<string, Record<string, { operationId: string }>>)
        .flatMap((operations) => Object.values(operations).map((operation) => operation.operationId))
      expect(operationIds.sort()).toEqual(["createPet", "getPet", "listPetChanges", "listPets"])
      expect(document.servers.map((server: { url: string }) => server.url)).toEqual([
        "/v1",
        "https://pets.example.test/v1",
        "http://staging.pets.example.test/v1"
      ])
    }))

  it.scoped("--version prints the version", () =>
    Effect.gen(function*() {
      const petstore = yield* makePetstore
      const version = yield* petstore(["--version"])
      expect(version.status).toBe(0)
      expect(version.stdout.trim()).toBe("1.0.0")
    }))

  // `petstore` and `petstore serve` start without the command-line parser (main.ts); with flags, through it.
  for (const flags of [undefined, [], ["--host", "127.0.0.1", "--port"]]) {
    const command = flags === undefined ? [] : ["serve", ...flags]
    it.scoped(`${["petstore", ...command, ...(flags?.length ? ["N"] : [])].join(" ")} serves on the configured address and stops on SIGTERM`, () =>
      Effect.gen(function*() {
        const database = yield* tempDatabaseFile
        const port = yield* Effect.promise(freePort)
        // With flags, the flags name the address and the environment a wrong one.
        const args = flags?.length ? [...command, String(port)] : command
        const env = flags?.length ? { HOST: "192.0.2.1", PORT: "1" } : { HOST: "127.0.0.1", PORT: String(port) }
        const child = spawn(process.execPath, ["src/main.ts", ...args], {
          cwd: root,
          env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: database, LOG_FORMAT: "json", ...env },
          stdio: ["ignore", "pipe", "pipe"]
        })
        const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
        const address = yield* Effect.promise(() =>
          new Promise<string>((resolve, reject) => {
            let output = ""
            child.stdout.on("data", (chunk) => {
              output += chunk
              const line = output.split("\n").find((line) => line.includes("petstore is listening"))
              if (line !== undefined) resolve(JSON.parse(line).annotations.address)
            })
            void exited.then((code) => reject(new Error(`exited with ${code} before listening: ${output}`)))
          })
        )
        expect(address).toBe(`http://127.0.0.1:${port}`)
        const health = yield* Effect.promise(() => fetch(`${address}/healthz`))
        expect(health.status).toBe(200)
        child.kill("SIGTERM")
        expect(yield* Effect.promise(() => exited)).toBe(0)
      }))
  }

  for (
    const { command, value, variable } of [
      { command: [], variable: "PORT", value: "abc" },
      { command: ["serve"], variable: "PORT", value: "abc" },
      // A real port: should the server start despite the bad level (then the run times out and the test fails).
      { command: ["serve", "--port", "65535"], variable: "LOG_LEVEL", value: "loud" },
      { command: ["keys", "list"], variable: "LOG_LEVEL", value: "loud" },
      { command: ["keys", "list"], variable: "LOG_FORMAT", value: "yaml" },
      { command: ["openapi"], variable: "PUBLIC_URL", value: "ftp://pets.example.test/v1" },
      { command: ["openapi"], variable: "STAGING_URL", value: "not a url" },
      { command: ["serve", "--port", "65535"], variable: "SHUTDOWN_TIMEOUT", value: "soon" },
      { command: ["serve", "--port", "65535"], variable: "CORS_ORIGINS", value: "https://app.example.test/path" }
    ]
  ) {
    it.scoped(`${["petstore", ...command].join(" ")} with ${variable}=${value} exits 1, naming the variable`, () =>
      Effect.gen(function*() {
        const petstore = yield* makePetstore
        const result = yield* petstore(command, { [variable]: value })
        expect(result.status).toBe(1)
        expect(result.stderr).toMatch(new RegExp(`^petstore: ${variable}\\b`))
        // A setting is not the command line: no pointer to the usage.
        expect(result.stderr).not.toContain("--help")
      }))
  }
})

describePostgres((_, url) => {
  describe("a refusal that waiting does not cure fails at once", { timeout: 60_000 }, () => {
    const server = new URL(url)
    /** `keys list` on the test server, `change`d; were it retried for DB_STARTUP_TIMEOUT, the run would be killed. */
    const keysListOn = (change: (url: URL) => void) =>
      Effect.gen(function*() {
        const petstore = yield* makePetstore
        const target = new URL(url)
        change(target)
        return yield* petstore(["keys", "list"], { DATABASE_URL: target.href, DB_STARTUP_TIMEOUT: "10 minutes" })
      })
    const expectOneLine = (result: Run) => {
      expect(result.status).toBe(1)
      expect(result.stdout).toBe("")
      expect(result.stderr.trimEnd().split("\n")).toHaveLength(1)
      expect(result.stderr).not.toContain("retrying")
    }

    it.scoped("a wrong password: one line naming the server and DATABASE_URL's password, exit 1", () =>
      Effect.gen(function*() {
        const result = yield* keysListOn((target) => void (target.password = "not-the-password-7c1e"))
        expectOneLine(result)
        expect(result.stderr).toMatch(
          new RegExp(
            `^petstore: PostgreSQL at ${server.host}${server.pathname} refused the password: .*28P01.*` +
              `Fix the password .* in DATABASE_URL`
          )
        )
        expect(result.stderr).not.toContain("not-the-password-7c1e")
      }))

    it.scoped("a database that does not exist: one line naming it and DATABASE_URL's database name, exit 1", () =>
      Effect.gen(function*() {
        const result = yield* keysListOn((target) => void (target.pathname = "/no_such_catalogue"))
        expectOneLine(result)
        expect(result.stderr).toMatch(
          new RegExp(
            `^petstore: PostgreSQL at ${server.host}/no_such_catalogue has no such database: .*3D000.*` +
              `Fix the database name in DATABASE_URL.*createdb no_such_catalogue`
          )
        )
        expect(result.stderr).not.toContain(server.password)
      }))
  })
})
