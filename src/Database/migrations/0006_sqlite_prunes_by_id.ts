import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * SQLite finds expired records without an index: its one writer gives a pet the next id and its record an expiry of
 * the time it was written plus the TTL, so records expire in id order, and the pruner walks the pets in id order from
 * where it stopped (`PetsRepo.releaseExpired`). The index on the expiry cost every create with a key one more index
 * page in its commit (`docs/retries-and-limits.md`). PostgreSQL keeps it: its ids come from a sequence that
 * transactions on several replicas draw from, so they do not follow commit order.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.onDialectOrElse({
    sqlite: () => sql`DROP INDEX pets_idempotency_expires_at`,
    orElse: () => Effect.void
  })
})
