import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * PostgreSQL only: the request counters that the replicas share, one row per rate-limited API key (`RateLimit/Postgres.ts`).
 * On SQLite the counters live in the process, and the table is not needed.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.onDialectOrElse({
    pg: () =>
      sql`CREATE TABLE rate_limits (
        key TEXT PRIMARY KEY,
        count BIGINT NOT NULL,
        expires_at BIGINT NOT NULL
      )`,
    orElse: () => Effect.void
  })
})
