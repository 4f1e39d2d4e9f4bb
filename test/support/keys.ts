import { Effect, Layer, type Redacted } from "effect"
import { ApiKeys } from "../../src/Auth/ApiKeys.js"
import * as Sql from "../../src/Database/Sql.js"

/**
 * An API key as the contract spells it, stated independently of the implementation's own pattern:
 * `psk_`, the 12-hex-digit key id, `_`, and 43 base64url characters (256 random bits).
 */
export const API_KEY_FORMAT = /^psk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$/

/** The secret part of a key: its 43 characters may contain `_` themselves, so it is not what follows the last `_`. */
export const secretOf = (key: string): string => {
  const secret = API_KEY_FORMAT.exec(key)?.[2]
  if (secret === undefined) throw new Error(`not a key: ${key}`)
  return secret
}

/**
 * A key service of its own on the database at `url`, with its own connections, as another process has: on PostgreSQL
 * another replica, on a SQLite file the CLI (`petstore keys revoke`).
 */
export const keysOfAnotherProcess = (url: Redacted.Redacted<string>) =>
  Effect.flatMap(
    Layer.build(ApiKeys.Default.pipe(Layer.provide(Sql.layer(url)))),
    (context) => Effect.provide(ApiKeys, context)
  )
