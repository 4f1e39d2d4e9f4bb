/**
 * Real files for tests that need them: a database path in a fresh temporary directory, removed with its contents
 * (the WAL and shared-memory files included) when the scope closes.
 */
import { FileSystem, Path } from "@effect/platform"
import { BunContext } from "@effect/platform-bun"
import { Effect, type Scope } from "effect"

export const tempDatabaseFile: Effect.Effect<string, never, Scope.Scope> = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const directory = yield* fs.makeTempDirectoryScoped({ prefix: "petstore-test-" })
  return path.join(directory, "petstore.db")
}).pipe(Effect.orDie, Effect.provide(BunContext.layer))
