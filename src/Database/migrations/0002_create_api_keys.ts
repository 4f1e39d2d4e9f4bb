import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// Only the SHA-256 of a key is stored; `id` is the public key id that the key itself carries.
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    hash TEXT NOT NULL,
    created_at TEXT NOT NULL,
    last_used_at TEXT,
    revoked_at TEXT
  )`
})
