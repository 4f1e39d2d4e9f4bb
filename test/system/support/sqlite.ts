/**
 * The SQLite file under a server, reached straight through `bun:sqlite`: a catalogue seeded in one statement, for the
 * system tests whose server must hold many pets from the start.
 */
import { Database } from "bun:sqlite"

/** `count` pets ("seeded 1", ...; available, in 50 categories) inserted into the migrated file, in one transaction. */
export const seedPets = (file: string, count: number) => {
  const db = new Database(file)
  db.run(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count})
     INSERT INTO pets (name, category_id, status) SELECT 'seeded ' || i, 1 + i % 50, 'available' FROM n`
  )
  db.close()
}
