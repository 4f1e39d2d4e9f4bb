/**
 * One server per SQLite database file, by the file itself (`SqliteOwner.ts`): a link to a served file is the same
 * file; the lock comes before the migrations, so a second (or newer) server never migrates a database another serves;
 * and a start that fails leaves no database it created. (PostgreSQL has no such rule: replicas share it.)
 */
import { describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { Effect, Exit, Layer, Option, Redacted, Scope } from "effect"
import { existsSync, mkdtempSync, readdirSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Sql from "../src/Database/Sql.js"
import { alreadyServed, own } from "../src/Database/SqliteOwner.js"
import { serve } from "../src/Serve.js"
import { otherNamesOf } from "./support/files.js"

const scratch = () => mkdtempSync(join(tmpdir(), "petstore-owner-"))

/** The served database on `file`, as `serve` holds it, until the scope closes (a service that started). */
const served = (file: string, started = true) =>
  Layer.build(Sql.servedLayer(Redacted.make(file), Effect.succeed(started)))

/** Why a second server on `file` does not start. */
const refusal = (file: string) => Effect.map(Effect.flip(Effect.scoped(served(file))), (error) => error.message)

const lastMigration = (file: string) => {
  const db = new Database(file, { readonly: true })
  try {
    return (db.query("SELECT max(migration_id) AS id FROM effect_sql_migrations").get() as { id: number }).id
  } finally {
    db.close()
  }
}

describe("one server per SQLite database file, whatever names it", () => {
  it.scoped("a symlink to the file or to its directory, and a hard link to it, are refused as the file itself", () =>
    Effect.gen(function*() {
      const directory = scratch()
      const file = join(directory, "pets.db")
      yield* served(file)
      const names = otherNamesOf(file, directory, join(scratch(), "other"))
      for (const path of [file, names.symlink, names.throughDirectory, names.hardLink]) {
        expect(yield* refusal(path)).toBe(alreadyServed(path))
      }
      expect(alreadyServed(names.symlink)).toContain(`(the file ${file})`)
    }))

  it.scoped("a newer server is refused before it migrates the database another one serves", () =>
    Effect.gen(function*() {
      const file = join(scratch(), "pets.db")
      yield* served(file)
      const latest = lastMigration(file)
      // The served database as an older server left it: its newest migration not applied yet.
      const db = new Database(file)
      db.run("DELETE FROM effect_sql_migrations WHERE migration_id = ?", [latest])
      db.close()
      expect(yield* refusal(file)).toBe(alreadyServed(file))
      expect(lastMigration(file)).toBe(latest - 1)
    }))

  it.scoped("a server of an earlier version, which holds <database>.lock, refuses this one", () =>
    Effect.gen(function*() {
      const file = join(scratch(), "pets.db")
      yield* Effect.scoped(served(file))
      const earlier = yield* Effect.acquireRelease(
        Effect.sync(() => {
          const lock = new Database(`${file}.lock`, { create: true, readwrite: true })
          lock.run("PRAGMA journal_mode = MEMORY")
          lock.run("BEGIN EXCLUSIVE")
          return lock
        }),
        (lock) => Effect.sync(() => lock.close())
      )
      expect(yield* refusal(file)).toBe(alreadyServed(file))
      earlier.close()
      yield* Effect.scoped(served(file))
    }))

  it.scoped("a server that is still starting on a new file holds it: a second writes nothing to it", () =>
    Effect.gen(function*() {
      const directory = scratch()
      const file = join(directory, "pets.db")
      yield* own(file, Effect.succeed(false))
      expect(yield* refusal(file)).toBe(alreadyServed(file))
      expect(readdirSync(directory)).toEqual(["pets.db"])
      expect(statSync(file).size).toBe(0)
    }))
})

describe("a start that fails leaves no database it created", () => {
  it.scoped("a server that never started removes the file it created, its -wal and -shm; one that started keeps it", () =>
    Effect.gen(function*() {
      const directory = scratch()
      const file = join(directory, "pets.db")
      const scope = yield* Scope.make()
      yield* Scope.extend(served(file, false), scope)
      expect(existsSync(file)).toBe(true)
      yield* Scope.close(scope, Exit.void)
      expect(readdirSync(directory)).toEqual([])
      yield* Effect.scoped(served(file, true))
      expect(existsSync(file)).toBe(true)
      // An existing file is never removed, started or not.
      yield* Effect.scoped(served(file, false))
      expect(existsSync(file)).toBe(true)
    }))

  it.scoped("serve on a port in use, on a new database path: it fails, and the directory stays empty", () =>
    Effect.gen(function*() {
      const taken = yield* Effect.acquireRelease(
        Effect.sync(() => Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("someone else") })),
        (server) => Effect.promise(() => server.stop(true))
      )
      const directory = scratch()
      const exit = yield* Effect.exit(serve({
        host: Option.some("127.0.0.1"),
        port: Option.some(taken.port!),
        database: Option.some(Redacted.make(join(directory, "pets.db")))
      }))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(readdirSync(directory)).toEqual([])
    }))
})
