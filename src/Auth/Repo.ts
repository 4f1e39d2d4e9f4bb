/**
 * Stored API keys: id, name, SHA-256 hash, creation, last use and revocation times (ISO-8601 text, portable SQL).
 */
import { SqlClient, SqlError, SqlSchema } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { ApiKeyId, ApiKeyInfo, ApiKeyRecord } from "../Domain/ApiKey.js"
import { statementHooks } from "../Observability/Hooks.js"
import { SqliteDatabase } from "../Sqlite.js"
import { SqliteWriter } from "../SqliteWriter.js"

const statementFailed = (cause: unknown) => new SqlError.SqlError({ cause, message: "Failed to execute statement" })

export class ApiKeysRepo extends Effect.Service<ApiKeysRepo>()("Auth/Repo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const sqlite = yield* Effect.serviceOption(SqliteDatabase)
    const writer = yield* Effect.serviceOption(SqliteWriter)
    const { observeStatement: observe, runStatement: run } = yield* statementHooks
    const system = sql.onDialectOrElse({ pg: () => "postgresql" as const, orElse: () => "sqlite" as const })
    const info = sql`id, name, created_at AS "createdAt", last_used_at AS "lastUsedAt", revoked_at AS "revokedAt"`

    const insertOne = SqlSchema.void({
      Request: Schema.Struct({ id: ApiKeyId, name: Schema.String, hash: Schema.String, createdAt: Schema.String }),
      execute: (key) =>
        sql`INSERT INTO api_keys (id, name, hash, created_at) VALUES (${key.id}, ${key.name}, ${key.hash}, ${key.createdAt})`
    })
    const findOne = SqlSchema.findOne({
      Request: ApiKeyId,
      Result: ApiKeyRecord,
      execute: (id) => sql`SELECT ${info}, hash FROM api_keys WHERE id = ${id}`
    })
    const findAll = SqlSchema.findAll({
      Request: Schema.Void,
      Result: ApiKeyInfo,
      execute: () => sql`SELECT ${info} FROM api_keys ORDER BY created_at, id`
    })
    const revokeOne = SqlSchema.findAll({
      Request: Schema.Struct({ id: ApiKeyId, at: Schema.String }),
      Result: Schema.Struct({ id: ApiKeyId }),
      execute: ({ at, id }) =>
        sql`UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ${at}) WHERE id = ${id} RETURNING id`
    })
    const touchOne = SqlSchema.void({
      Request: Schema.Struct({ id: ApiKeyId, at: Schema.String }),
      execute: ({ at, id }) => sql`UPDATE api_keys SET last_used_at = ${at} WHERE id = ${id}`
    })

    const portable = {
      insert: (key: { id: ApiKeyId; name: string; hash: string; createdAt: string }) =>
        insertOne(key).pipe(
          Effect.catchTag("ParseError", Effect.die),
          Effect.withSpan("ApiKeysRepo.insert", { attributes: { id: key.id } })
        ),
      findById: (id: ApiKeyId) =>
        findOne(id).pipe(
          Effect.catchTag("ParseError", Effect.die),
          (effect) => observe({ system, operation: "SELECT", collection: "api_keys" }, effect),
          Effect.withSpan("ApiKeysRepo.findById", { attributes: { id } })
        ),
      list: findAll(undefined).pipe(Effect.catchTag("ParseError", Effect.die), Effect.withSpan("ApiKeysRepo.list")),
      /** Marks a key revoked (keeping the first revocation time); false when no key has that id. */
      revoke: (id: ApiKeyId, at: string) =>
        revokeOne({ id, at }).pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.catchTag("ParseError", Effect.die),
          Effect.withSpan("ApiKeysRepo.revoke", { attributes: { id } })
        ),
      touch: (id: ApiKeyId, at: string) =>
        touchOne({ id, at }).pipe(
          Effect.catchTag("ParseError", Effect.die),
          (effect) => observe({ system, operation: "UPDATE", collection: "api_keys" }, effect),
          Effect.withSpan("ApiKeysRepo.touch", { attributes: { id } })
        )
    } as const
    if (Option.isNone(sqlite) || Option.isNone(writer)) return portable

    // SQLite: the two statements of a request are prepared once, the read on the reading connection, the update on the
    // writer's (run in its group commit); the columns are TEXT NOT NULL (nullable for the times), so a row is an
    // `ApiKeyRecord` as it comes.
    const selectSql = {
      system: "sqlite",
      operation: "SELECT",
      collection: "api_keys",
      text: `SELECT id, name, created_at AS "createdAt", last_used_at AS "lastUsedAt", revoked_at AS "revokedAt", hash
       FROM api_keys WHERE id = ?`
    } as const
    const updateSql = {
      system: "sqlite",
      operation: "UPDATE",
      collection: "api_keys",
      text: `UPDATE api_keys SET last_used_at = ? WHERE id = ?`
    } as const
    const selectOne = sqlite.value.prepare<ApiKeyRecord, [string]>(selectSql.text)
    const updateLastUsed = writer.value.database.prepare<unknown, [string, string]>(updateSql.text)
    return {
      ...portable,
      findById: (id: ApiKeyId) => run(selectSql, () => Option.fromNullable(selectOne.get(id)), statementFailed),
      touch: (id: ApiKeyId, at: string) => observe(updateSql, writer.value.write(() => void updateLastUsed.run(at, id)))
    }
  })
}) {}
