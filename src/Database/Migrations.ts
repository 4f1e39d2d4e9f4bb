/**
 * The schema's migrations, bundled into the executable (no files are read at run time; keys are `<id>_<name>`), and
 * the layer that applies them. An applied migration never changes: a new one is added at the end.
 */
import { Migrator, SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { FEED_CHANNEL } from "./Notifications.js"

/** A database's feed id: 16 hex digits at random, made once (and again by a restore: the catalogue is replaced). */
export const newFeedId = (): string => Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString("hex")

const bigint = (sql: SqlClient.SqlClient) => sql.onDialectOrElse({ pg: () => "BIGINT", orElse: () => "INTEGER" })

export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  // Keyset pages walk the primary key; the status filter walks (status, id), so both are index range scans.
  // SQLite's AUTOINCREMENT: an id is never handed out twice, even after the newest row is gone.
  "0001_create_pets": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const id = sql.onDialectOrElse({
      pg: () => "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
      orElse: () => "INTEGER PRIMARY KEY AUTOINCREMENT"
    })
    yield* sql.unsafe(`CREATE TABLE pets (
      id ${id},
      name TEXT NOT NULL,
      category_id ${bigint(sql)} NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('available', 'pending', 'sold'))
    )`)
    yield* sql`CREATE INDEX pets_status_id ON pets (status, id)`
  }),
  // Only the SHA-256 of a key is stored; `id` is the public key id that the key itself carries.
  "0002_create_api_keys": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`CREATE TABLE api_keys (
      id TEXT PRIMARY KEY,
      name TEXT NOT NULL,
      hash TEXT NOT NULL,
      created_at TEXT NOT NULL,
      last_used_at TEXT,
      revoked_at TEXT
    )`),
  // The answers of creates sent with an `Idempotency-Key`, by API key (`scope`) and key; moved into `pets` by 0005.
  "0003_create_idempotency_keys": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql.unsafe(`CREATE TABLE idempotency_keys (
      scope TEXT NOT NULL,
      idempotency_key TEXT NOT NULL,
      fingerprint TEXT NOT NULL,
      status INTEGER NOT NULL,
      body TEXT NOT NULL,
      location TEXT,
      created_at ${bigint(sql)} NOT NULL,
      expires_at ${bigint(sql)} NOT NULL,
      PRIMARY KEY (scope, idempotency_key)
    )`)
    yield* sql`CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at)`
  }),
  // PostgreSQL only: the rate-limit counters the replicas share (`RateLimit/PostgresStore.ts`); SQLite's are in memory.
  "0004_create_rate_limits": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.onDialectOrElse({
      pg: () => sql`CREATE TABLE rate_limits (key TEXT PRIMARY KEY, count BIGINT NOT NULL, expires_at BIGINT NOT NULL)`,
      orElse: () => Effect.void
    })),
  /**
   * The record of a create sent with an `Idempotency-Key` lives in the row of the pet it created (which never changes
   * once written): the key, the API key whose it is (`idempotency_scope`), when it expires (milliseconds since the
   * epoch). Both indexes are partial (only rows that hold a key); the unique one names the key first, the column that
   * tells keys apart; the other finds expired records for the pruner.
   */
  "0005_idempotency_in_pets": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`ALTER TABLE pets ADD COLUMN idempotency_key TEXT`
    yield* sql`ALTER TABLE pets ADD COLUMN idempotency_scope TEXT`
    yield* sql.unsafe(`ALTER TABLE pets ADD COLUMN idempotency_expires_at ${bigint(sql)}`)
    yield* sql`UPDATE pets SET idempotency_key = records.idempotency_key, idempotency_scope = records.scope,
        idempotency_expires_at = records.expires_at
      FROM idempotency_keys AS records WHERE records.location = '/v1/pets/' || pets.id`
    yield* sql`CREATE UNIQUE INDEX pets_idempotency_key ON pets (idempotency_key, idempotency_scope)
      WHERE idempotency_key IS NOT NULL`
    yield* sql`CREATE INDEX pets_idempotency_expires_at ON pets (idempotency_expires_at)
      WHERE idempotency_key IS NOT NULL`
    yield* sql`DROP TABLE idempotency_keys`
  }),
  /**
   * SQLite finds expired records without an index, which would cost every create with a key one more index page: its
   * one writer hands out ids and expiries (write time plus the TTL) in the same order, so the pruner walks the ids
   * (`PetsRepo.releaseExpired`). PostgreSQL keeps the index: its ids come from a sequence that transactions on several
   * replicas draw from, so they do not follow commit order.
   */
  "0006_sqlite_prunes_by_id": Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql.onDialectOrElse({ sqlite: () => sql`DROP INDEX pets_idempotency_expires_at`, orElse: () => Effect.void })
  ),
  /**
   * The change feed (`PetsRepo`'s feed reads). `feed_meta` holds the database's feed id, made once at random, so that
   * a position taken from another database (the catalogue restored or replaced) is told apart. SQLite's one writer
   * hands out ids in commit order, so a pet's id is its position. On PostgreSQL a trigger gives each row inserted into
   * `pets`, whoever inserts it, the next position from `feed_counter`, inside the inserting transaction: the counter's
   * row stays locked until that transaction ends, so the next insert waits for it to commit. Positions are in commit
   * order, and none commits below a position already read. Existing pets take their ids.
   */
  "0007_change_feed": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const id = yield* Effect.sync(newFeedId)
    yield* sql`CREATE TABLE feed_meta (id TEXT NOT NULL)`
    yield* sql`INSERT INTO feed_meta (id) VALUES (${id})`
    yield* sql.onDialectOrElse({
      pg: () =>
        Effect.gen(function*() {
          yield* sql`CREATE TABLE feed_counter (position BIGINT NOT NULL)`
          yield* sql`INSERT INTO feed_counter (position) SELECT coalesce(max(id), 0) FROM pets`
          yield* sql`ALTER TABLE pets ADD COLUMN position BIGINT`
          yield* sql`UPDATE pets SET position = id`
          yield* sql`ALTER TABLE pets ALTER COLUMN position SET NOT NULL`
          yield* sql`CREATE UNIQUE INDEX pets_position ON pets (position)`
          yield* sql.unsafe(`CREATE FUNCTION pets_take_position() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              UPDATE feed_counter SET position = position + 1 RETURNING position INTO NEW.position;
              RETURN NEW;
            END $$`)
          yield* sql`CREATE TRIGGER pets_position BEFORE INSERT ON pets
            FOR EACH ROW EXECUTE FUNCTION pets_take_position()`
        }),
      orElse: () => Effect.void
    })
  }),
  /**
   * PostgreSQL: a statement that inserts pets notifies `FEED_CHANNEL` (`Notifications.ts`), delivered when it commits,
   * so that every replica's change feed wakes at once rather than at its next look. A wake-up only: the feed reads the
   * table. It carries a payload: `PgClient.listen` passes on no notification without one.
   */
  "0008_feed_notifies": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.onDialectOrElse({
      pg: () =>
        Effect.zipRight(
          sql.unsafe(`CREATE FUNCTION pets_notify_feed() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              PERFORM pg_notify('${FEED_CHANNEL}', 'created');
              RETURN NULL;
            END $$`),
          sql`CREATE TRIGGER pets_feed_notify AFTER INSERT ON pets FOR EACH STATEMENT EXECUTE FUNCTION pets_notify_feed()`
        ),
      orElse: () => Effect.void
    }))
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
