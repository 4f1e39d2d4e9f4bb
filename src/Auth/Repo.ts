/**
 * Stored API keys: id, name, SHA-256 hash, creation, last use and revocation times (ISO-8601 text, portable SQL; the
 * columns are TEXT NOT NULL, nullable for the last use and the revocation), each row decoded as it is read.
 */
import { Effect, Option, Schema } from "effect"
import { statement, Statements } from "../Database/Statements.js"
import { ApiKeyId, type ApiKeyInfo, type ApiKeyRecord } from "../Domain/ApiKey.js"

const INFO = `id, name, created_at AS "createdAt", last_used_at AS "lastUsedAt", revoked_at AS "revokedAt"`
const INSERT = statement<never, [id: ApiKeyId, name: string, hash: string, createdAt: string]>(
  `INSERT INTO api_keys (id, name, hash, created_at) VALUES (?, ?, ?, ?)`
)
/** A key's row: its info, and its hash when the statement reads it. */
const Info = Schema.Struct({
  id: ApiKeyId,
  name: Schema.String,
  createdAt: Schema.String,
  lastUsedAt: Schema.NullOr(Schema.String),
  revokedAt: Schema.NullOr(Schema.String)
})
const Record = Schema.Struct({ ...Info.fields, hash: Schema.String })
const FIND_ONE = statement<ApiKeyRecord, [ApiKeyId]>(`SELECT ${INFO}, hash FROM api_keys WHERE id = ?`, Record)
const FIND_ALL = statement<ApiKeyInfo>(`SELECT ${INFO} FROM api_keys ORDER BY created_at, id`, Info)
/** Keeps the first revocation time. */
const REVOKE = statement<{ readonly id: ApiKeyId }, [at: string, id: ApiKeyId]>(
  `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? RETURNING id`,
  Schema.Struct({ id: ApiKeyId })
)
const TOUCH = statement<never, [at: string, id: ApiKeyId]>(`UPDATE api_keys SET last_used_at = ? WHERE id = ?`)

export class ApiKeysRepo extends Effect.Service<ApiKeysRepo>()("Auth/Repo", {
  dependencies: [Statements.Default],
  effect: Effect.map(Statements, ({ query }) => ({
    insert: (key: { id: ApiKeyId; name: string; hash: string; createdAt: string }) =>
      query(INSERT, [key.id, key.name, key.hash, key.createdAt], () => undefined),
    findById: (id: ApiKeyId) => query(FIND_ONE, [id], (rows) => Option.fromNullable(rows[0])),
    list: query(FIND_ALL, [], (rows): ReadonlyArray<ApiKeyInfo> => rows),
    /** Marks a key revoked (keeping the first revocation time); false when no key has that id. */
    revoke: (id: ApiKeyId, at: string) => query(REVOKE, [at, id], (rows) => rows.length > 0),
    touch: (id: ApiKeyId, at: string) => query(TOUCH, [at, id], () => undefined)
  }))
}) {}
