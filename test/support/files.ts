/**
 * Real files for tests that need them: a database path in a fresh temporary directory, removed with its contents
 * (the WAL and shared-memory files included) when the scope closes, and the rows a query reads from such a file.
 */
import { FileSystem, Path } from "@effect/platform"
import { BunContext } from "@effect/platform-bun"
import { Database } from "bun:sqlite"
import { Effect, type Scope } from "effect"

export const tempDatabaseFile: Effect.Effect<string, never, Scope.Scope> = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const directory = yield* fs.makeTempDirectoryScoped({ prefix: "petstore-test-" })
  return path.join(directory, "petstore.db")
}).pipe(Effect.orDie, Effect.provide(BunContext.layer))

/** The rows `query` reads from the SQLite file, through a read-only connection closed before this returns. */
export const rows = (file: string, query: string) => {
  const db = new Database(file, { readonly: true })
  try {
    return db.query(query).all()
  } finally {
    db.close()
  }
}
