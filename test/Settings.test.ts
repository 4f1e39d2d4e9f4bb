/**
 * Settings as the command line reads them: a command reads only the settings it uses, so a bad one elsewhere does not
 * stop it; a bad one it uses stops it with exit 1 and the variable named, never a usage error. A `DATABASE_URL` that
 * petstore cannot use says what it accepts, or what to do.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync } from "node:fs"
import { makePetstore, spawnPetstore } from "./support/cli.js"

describe("settings", { timeout: 120_000 }, () => {
  it.scoped("PORT=99999 petstore keys list works: keys list never listens", () =>
    Effect.gen(function*() {
      const petstore = yield* makePetstore
      const list = yield* petstore(["keys", "list"], { PORT: "99999", HOST: "", SHUTDOWN_DELAY: "soon" })
      expect(list.stderr).toBe("")
      expect(list.status).toBe(0)
      expect(list.stdout.split(/\s+/).slice(0, 3)).toEqual(["ID", "NAME", "CREATED"])
    }))

  it.scoped("openapi reads neither PORT nor DATABASE_URL's timeouts", () =>
    Effect.gen(function*() {
      const petstore = yield* makePetstore
      const openapi = yield* petstore(["openapi"], { PORT: "99999", DB_QUERY_TIMEOUT: "never" })
      expect(openapi.status).toBe(0)
      expect(JSON.parse(openapi.stdout).openapi).toBe("3.1.0")
    }))

  it.scoped("keys on SQLite reads DB_QUERY_TIMEOUT, not PostgreSQL's connection timeouts", () =>
    Effect.gen(function*() {
      const petstore = yield* makePetstore
      const list = yield* petstore(["keys", "list"], { DB_CONNECT_TIMEOUT: "never", DB_STARTUP_TIMEOUT: "never" })
      expect(list.status).toBe(0)
      const bad = yield* petstore(["keys", "list"], { DB_QUERY_TIMEOUT: "never" })
      expect(bad.status).toBe(1)
      expect(bad.stderr).toMatch(/^petstore: DB_QUERY_TIMEOUT must be a positive duration/)
    }))

  for (const command of [["healthcheck"], ["serve", "--host", "127.0.0.1"]]) {
    it.scoped(`petstore ${command.join(" ")} with PORT=99999 exits 1 naming PORT, not with a usage error`, () =>
      Effect.gen(function*() {
        const petstore = yield* makePetstore
        const result = yield* petstore(command, { PORT: "99999" })
        expect(result.status).toBe(1)
        expect(result.stderr.trim()).toBe(`petstore: PORT must be an integer from 1 to 65535 (got "99999")`)
        expect(result.stderr).not.toContain("--help")
      }))
  }

  it.scoped("a DATABASE_URL of another scheme names the ones petstore accepts, never the password", () =>
    Effect.gen(function*() {
      const result = yield* spawnPetstore("mysql://shop:s3cret@db.example.test/pets", ["keys", "list"], {})
      expect(result.status).toBe(1)
      expect(result.stderr).toContain("DATABASE_URL is a mysql:// URL")
      expect(result.stderr).toContain("postgres://")
      expect(result.stderr).toContain("file:///data/petstore.db")
      expect(result.stderr).not.toContain("s3cret")
      expect(result.stderr.trim().split("\n")).toHaveLength(1)
    }))

  it.scoped.skipIf(!existsSync("/proc/self"))(
    "DATABASE_URL=/proc/x.db says to choose a file on a writable disk",
    () =>
      Effect.gen(function*() {
        const result = yield* spawnPetstore("/proc/x.db", ["keys", "list"], {})
        expect(result.status).toBe(1)
        expect(result.stderr).toContain(
          "/proc is on proc, a virtual file system of the kernel that holds no data files"
        )
        expect(result.stderr).toContain("Set DATABASE_URL to a file on a writable disk")
      })
  )

  for (
    const [variable, value, message] of [
      [
        "CORS_ORIGINS",
        "https://a.example.com/",
        `CORS_ORIGINS must be * or comma-separated origins such as https://app.example.com: "https://a.example.com/" ` +
        `ends with a slash, which no browser's Origin has; write https://a.example.com (got "https://a.example.com/")`
      ],
      [
        "CORS_ORIGINS",
        "https://a.example.com,https://b.example.com/app",
        `CORS_ORIGINS must be * or comma-separated origins such as https://app.example.com: ` +
        `"https://b.example.com/app" has a path, a query or a fragment, which no browser's Origin has; write ` +
        `https://b.example.com (got "https://a.example.com,https://b.example.com/app")`
      ],
      [
        "METRICS_ADDRESS",
        "42086",
        `METRICS_ADDRESS must be host:port, such as 127.0.0.1:9464, 0.0.0.0:9464 or [::1]:9464 (a port alone names ` +
        `no host) (got "42086")`
      ]
    ]
  ) {
    it.scoped(`${variable}=${value}: one line saying what it got and what it expects, exit 1`, () =>
      Effect.gen(function*() {
        const petstore = yield* makePetstore
        // A real port: should the server start despite the bad setting, the run times out and the test fails.
        const result = yield* petstore(["serve", "--host", "127.0.0.1", "--port", "65535"], { [variable]: value })
        expect(result.status).toBe(1)
        expect(result.stderr).toBe(`petstore: ${message}\n`)
      }))
  }
})
