/**
 * Real files for tests that need them: a database path in a fresh temporary directory, removed with its contents
 * (the WAL and shared-memory files included) when the scope closes, the rows a query reads from such a file, and
 * other names of a file.
 */
import { FileSystem, Path } from "@effect/platform"
import { BunContext } from "@effect/platform-bun"
import { Database } from "bun:sqlite"
import { Effect, type Scope } from "effect"
import { linkSync, mkdirSync, symlinkSync } from "node:fs"
import { basename, join } from "node:path"

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

/**
 * The SQLite file `file` (in `directory`) under three other names in `elsewhere`, a new directory: a symlink to the
 * file, the file through a symlink to its directory, and a hard link to it.
 */
export const otherNamesOf = (file: string, directory: string, elsewhere: string) => {
  mkdirSync(elsewhere)
  const names = {
    symlink: join(elsewhere, "link.db"),
    throughDirectory: join(elsewhere, "directory", basename(file)),
    hardLink: join(elsewhere, "hard.db")
  }
  symlinkSync(file, names.symlink)
  symlinkSync(directory, join(elsewhere, "directory"))
  linkSync(file, names.hardLink)
  return names
}
