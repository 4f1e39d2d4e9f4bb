/**
 * The backends the repository and HTTP suites run on: SQLite always, PostgreSQL when `TEST_DATABASE_URL` names a
 * database on a server the tests may create schemas in (`scripts/pg-test-cluster.sh start` prints one; CI always sets
 * it). Without it the PostgreSQL suites are reported as skipped, under a name that says how to run them.
 *
 * Every test gets a fresh, empty database of its own: a SQLite file in a temporary directory, or a PostgreSQL schema
 * (reached through `search_path`), dropped with the test's scope. Suites run in parallel without seeing each other.
 */
import { PgClient } from "@effect/sql-pg"
import { describe } from "@effect/vitest"
import { Effect, Redacted, type Scope } from "effect"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { NO_POSTGRES, skippedName } from "./skips.js"

export interface Backend {
  readonly name: "SQLite" | "PostgreSQL"
  /** The `DATABASE_URL` of a fresh, empty database, gone when the scope closes. */
  readonly freshDatabase: Effect.Effect<Redacted.Redacted<string>, never, Scope.Scope>
}

export const TEST_DATABASE_URL: string | undefined = process.env.TEST_DATABASE_URL || undefined

export const SQLite: Backend = {
  name: "SQLite",
  freshDatabase: Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "petstore-test-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  ).pipe(Effect.map((dir) => Redacted.make(join(dir, "petstore.db"))))
}

/** The URL with `search_path` set to the schema, for every connection opened with it. */
export const withSearchPath = (url: string, schema: string): string => {
  const at = url.indexOf("?")
  const params = new URLSearchParams(at === -1 ? "" : url.slice(at + 1))
  params.set("options", `-c search_path=${schema}`)
  return `${at === -1 ? url : url.slice(0, at)}?${params}`
}

/** Runs statements on the test server's database itself (to create and drop schemas and databases). */
export const withAdmin = <A, E>(url: string, f: (sql: PgClient.PgClient) => Effect.Effect<A, E>) =>
  Effect.flatMap(PgClient.PgClient, f).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url) })))

export const postgres = (url: string): Backend => ({
  name: "PostgreSQL",
  freshDatabase: Effect.gen(function*() {
    const schema = `test_${randomBytes(8).toString("hex")}`
    yield* Effect.acquireRelease(
      withAdmin(url, (sql) => sql`CREATE SCHEMA ${sql(schema)}`),
      () => Effect.ignore(withAdmin(url, (sql) => sql`DROP SCHEMA ${sql(schema)} CASCADE`))
    ).pipe(Effect.orDie)
    return Redacted.make(withSearchPath(url, schema))
  })
})

/** A PostgreSQL-only suite's name: without `TEST_DATABASE_URL`, it says why the suite is skipped. */
export const postgresOnly = (name: string): string =>
  TEST_DATABASE_URL === undefined ? skippedName(name, NO_POSTGRES) : name

const SKIPPED = skippedName("PostgreSQL", NO_POSTGRES)

/** Declares a PostgreSQL-only suite, given `TEST_DATABASE_URL`; without it the suite is reported as skipped. */
export const describePostgres = (suite: (backend: Backend, url: string) => void) => {
  if (TEST_DATABASE_URL !== undefined) {
    describe("PostgreSQL", () => suite(postgres(TEST_DATABASE_URL!), TEST_DATABASE_URL!))
  } else describe.skip(SKIPPED, () => suite(postgres("postgres://unset"), "postgres://unset"))
}

/** Declares the suite once per backend; without `TEST_DATABASE_URL`, the PostgreSQL one is reported as skipped. */
export const describeBackends = (suite: (backend: Backend) => void) => {
  describe("SQLite", () => suite(SQLite))
  describePostgres(suite)
}
