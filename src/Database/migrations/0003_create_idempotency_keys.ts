import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The answers of creates sent with an `Idempotency-Key`, by the API key that sent them (`scope`) and the key. A row is
 * written in the transaction that adds its pet, so an acknowledged create always has one. Times are milliseconds since
 * the epoch; rows past `expires_at` are pruned in the background (hence the index).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const bigint = sql.onDialectOrElse({ pg: () => "BIGINT", orElse: () => "INTEGER" })
  yield* sql.unsafe(`CREATE TABLE idempotency_keys (
    scope TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status INTEGER NOT NULL,
    body TEXT NOT NULL,
    location TEXT,
    created_at ${bigint} NOT NULL,
    expires_at ${bigint} NOT NULL,
    PRIMARY KEY (scope, idempotency_key)
  )`)
  yield* sql`CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at)`
})
