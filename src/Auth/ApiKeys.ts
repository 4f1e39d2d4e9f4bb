/**
 * Issuing, listing, revoking and checking API keys. A key is checked against the database on every request, so a
 * revocation made by any process holds at once; the stored hash is compared in constant time.
 */
import type { SqlError } from "@effect/sql"
import { Clock, Effect, Option, Redacted } from "effect"
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import { type ApiKeyId, type ApiKeyInfo, type AuthenticatedKey, KEY_PREFIX } from "../Domain/ApiKey.js"
import { ApiKeysRepo } from "./Repo.js"

const KEY_PATTERN = new RegExp(`^${KEY_PREFIX}_([0-9a-f]{12})_[A-Za-z0-9_-]{43}$`)

/** A new key: the prefix, a 48-bit public id and a 256-bit secret. */
export const generateKey = (): { readonly id: ApiKeyId; readonly key: Redacted.Redacted<string> } => {
  const id = randomBytes(6).toString("hex") as ApiKeyId
  return { id, key: Redacted.make(`${KEY_PREFIX}_${id}_${randomBytes(32).toString("base64url")}`) }
}

export const hashKey = (key: string): string => createHash("sha256").update(key).digest("hex")

/** The key id a well-formed key carries. */
export const keyIdOf = (key: string): Option.Option<ApiKeyId> => {
  const match = KEY_PATTERN.exec(key)
  return match === null ? Option.none() : Option.some(match[1] as ApiKeyId)
}

/** Constant-time comparison of a presented key with a stored hash. */
export const matchesHash = (key: string, storedHash: string): boolean => {
  const presented = createHash("sha256").update(key).digest()
  const stored = Buffer.from(storedHash, "hex")
  return stored.length === presented.length && timingSafeEqual(presented, stored)
}

/** `last used` is written at most once a minute per key, so reads do not turn into writes. */
const TOUCH_INTERVAL_MS = 60_000

const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())

export class ApiKeys extends Effect.Service<ApiKeys>()("Auth/ApiKeys", {
  effect: Effect.gen(function*() {
    const repo = yield* ApiKeysRepo

    const create = (name: string) =>
      Effect.gen(function*() {
        const { id, key } = generateKey()
        yield* repo.insert({ id, name, hash: hashKey(Redacted.value(key)), createdAt: yield* now })
        return { id, name, key } as const
      }).pipe(Effect.withSpan("ApiKeys.create"))

    const list: Effect.Effect<ReadonlyArray<ApiKeyInfo>, SqlError.SqlError> = repo.list

    const revoke = (id: ApiKeyId) => Effect.flatMap(now, (at) => repo.revoke(id, at)).pipe(Effect.withSpan("ApiKeys.revoke"))

    /**
     * The key a bearer token stands for, if it is a known, unrevoked key. Runs on every request: a plain chain of
     * steps, without a span (a span per request costs more than the lookup itself).
     */
    const authenticate = (token: Redacted.Redacted<string>): Effect.Effect<Option.Option<AuthenticatedKey>, SqlError.SqlError> => {
      const key = Redacted.value(token)
      const id = keyIdOf(key)
      if (Option.isNone(id)) return Effect.succeedNone
      return Effect.flatMap(repo.findById(id.value), (found) => {
        if (Option.isNone(found)) return Effect.succeedNone
        const record = found.value
        if (!matchesHash(key, record.hash) || record.revokedAt !== null) return Effect.succeedNone
        const authenticated = Option.some<AuthenticatedKey>({ id: record.id, name: record.name })
        return Effect.clockWith((clock) => {
          const at = clock.unsafeCurrentTimeMillis()
          if (record.lastUsedAt !== null && at - Date.parse(record.lastUsedAt) < TOUCH_INTERVAL_MS) {
            return Effect.succeed(authenticated)
          }
          return Effect.as(repo.touch(record.id, new Date(at).toISOString()), authenticated)
        })
      })
    }

    return { create, list, revoke, authenticate } as const
  }),
  dependencies: [ApiKeysRepo.Default]
}) {}
