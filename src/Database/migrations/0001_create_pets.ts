import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// Keyset pages walk the primary key; the status filter walks (status, id), so both are index range scans.
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.onDialectOrElse({
    pg: () =>
      sql`CREATE TABLE pets (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        name TEXT NOT NULL,
        category_id BIGINT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('available', 'pending', 'sold'))
      )`,
    // AUTOINCREMENT: an id is never handed out twice, even after the newest row is gone.
    orElse: () =>
      sql`CREATE TABLE pets (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL,
        category_id INTEGER NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('available', 'pending', 'sold'))
      )`
  })
  yield* sql`CREATE INDEX pets_status_id ON pets (status, id)`
})
