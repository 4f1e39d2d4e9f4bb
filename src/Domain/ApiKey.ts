/**
 * API keys. A key reads `psk_<id>_<secret>`: a recognisable prefix, the public key id (12 hex digits) and 256 random
 * bits (43 base64url characters). Only the SHA-256 of the whole key is stored, under the key id.
 */
import { Schema } from "effect"

export const KEY_PREFIX = "psk"

export const ApiKeyId = Schema.String.pipe(
  Schema.pattern(/^[0-9a-f]{12}$/, { message: () => "a key id is 12 hexadecimal digits" }),
  Schema.brand("ApiKeyId")
)
export type ApiKeyId = typeof ApiKeyId.Type

export const KeyName = Schema.Trim.pipe(
  Schema.compose(Schema.Trimmed.pipe(Schema.minLength(1), Schema.maxLength(100))),
  Schema.annotations({ message: () => ({ message: "a key name is 1 to 100 characters", override: true }) })
)

/** What `keys list` shows of a key: never the key itself, nor its hash. */
export interface ApiKeyInfo {
  readonly id: ApiKeyId
  readonly name: string
  readonly createdAt: string
  readonly lastUsedAt: string | null
  readonly revokedAt: string | null
}

/** A stored key: its info and the hex SHA-256 of the key. */
export interface ApiKeyRecord extends ApiKeyInfo {
  readonly hash: string
}

/** The key a request authenticated with, as the handlers see it. */
export type AuthenticatedKey = Pick<ApiKeyInfo, "id" | "name">
