import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The record of a create sent with an `Idempotency-Key` moves into the row of the pet it created: the key, the API key
 * whose it is (`idempotency_scope`) and when it expires (milliseconds since the epoch). The rest of what a retry is
 * answered with — the status (always 201), the body and the `Location` — and the payload it must match are that row's
 * own columns, and a pet's row is never changed once written. One row written per create instead of two: a create with
 * a key costs one unique index more than one without, not a second table and its indexes (`docs/retries-and-limits.md`).
 *
 * The unique index is partial (only the rows that hold a key) and names the key first, the column that tells keys apart;
 * the second partial index finds expired records for the pruner. The records of `idempotency_keys` are carried over to
 * the pets their `Location` names, then the table is dropped.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const bigint = sql.onDialectOrElse({ pg: () => "BIGINT", orElse: () => "INTEGER" })
  yield* sql`ALTER TABLE pets ADD COLUMN idempotency_key TEXT`
  yield* sql`ALTER TABLE pets ADD COLUMN idempotency_scope TEXT`
  yield* sql.unsafe(`ALTER TABLE pets ADD COLUMN idempotency_expires_at ${bigint}`)
  yield* sql`UPDATE pets SET
      idempotency_key = records.idempotency_key,
      idempotency_scope = records.scope,
      idempotency_expires_at = records.expires_at
    FROM idempotency_keys AS records
    WHERE records.location = '/v1/pets/' || pets.id`
  yield* sql`CREATE UNIQUE INDEX pets_idempotency_key ON pets (idempotency_key, idempotency_scope)
    WHERE idempotency_key IS NOT NULL`
  yield* sql`CREATE INDEX pets_idempotency_expires_at ON pets (idempotency_expires_at)
    WHERE idempotency_key IS NOT NULL`
  yield* sql`DROP TABLE idempotency_keys`
})
