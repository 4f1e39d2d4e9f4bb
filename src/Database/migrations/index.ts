/**
 * The migrations, bundled into the executable (no files are read at run time; keys are `<id>_<name>`), and the layer
 * that applies them.
 */
import { Migrator, SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import CreatePets from "./0001_create_pets.js"
import CreateApiKeys from "./0002_create_api_keys.js"
import CreateIdempotencyKeys from "./0003_create_idempotency_keys.js"
import CreateRateLimits from "./0004_create_rate_limits.js"
import IdempotencyInPets from "./0005_idempotency_in_pets.js"
import SqlitePrunesById from "./0006_sqlite_prunes_by_id.js"

export const migrations = {
  "0001_create_pets": CreatePets,
  "0002_create_api_keys": CreateApiKeys,
  "0003_create_idempotency_keys": CreateIdempotencyKeys,
  "0004_create_rate_limits": CreateRateLimits,
  "0005_idempotency_in_pets": IdempotencyInPets,
  "0006_sqlite_prunes_by_id": SqlitePrunesById
}

const runMigrations = Migrator.make({})({ loader: Migrator.fromRecord(migrations) })

/** A fixed 64-bit key, the same in every replica: the ASCII bytes of "petstore". */
const MIGRATION_LOCK = "8099007544119226981"

/**
 * On PostgreSQL, replicas that start at the same moment take turns: the migrator runs while this process holds a
 * session advisory lock on a connection of its own (the migrator's own table lock does not cover creating its table,
 * which two replicas would race on). The lock goes with the connection if the process dies. Waiting for it is a
 * statement like any other: past the statement timeout it fails, and the start-up retries.
 */
const withMigrationLock = (sql: SqlClient.SqlClient) =>
  Effect.scoped(Effect.gen(function*() {
    const connection = yield* sql.reserve
    const lock = (call: string) => connection.executeUnprepared(`SELECT ${call}(${MIGRATION_LOCK})`, [], undefined)
    yield* Effect.acquireRelease(lock("pg_advisory_lock"), () => Effect.ignore(lock("pg_advisory_unlock")))
    return yield* runMigrations
  }))

export const MigrationsLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const applied = yield* sql.onDialectOrElse({ pg: () => withMigrationLock(sql), orElse: () => runMigrations })
    if (applied.length > 0) yield* Effect.logDebug("migrations applied", applied.map(([id, name]) => `${id}_${name}`))
  }).pipe(Effect.withSpan("Sql.migrate"))
)
