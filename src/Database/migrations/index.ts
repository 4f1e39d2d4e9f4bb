/**
 * Migrations are bundled into the executable (no files are read at run time). Keys are `<id>_<name>`.
 */
import CreatePets from "./0001_create_pets.js"
import CreateApiKeys from "./0002_create_api_keys.js"
import CreateIdempotencyKeys from "./0003_create_idempotency_keys.js"
import CreateRateLimits from "./0004_create_rate_limits.js"
import IdempotencyInPets from "./0005_idempotency_in_pets.js"
import SqlitePrunesById from "./0006_sqlite_prunes_by_id.js"

export const migrations = {
  "0001_create_pets": CreatePets,
  "0002_create_api_keys": CreateApiKeys,
  "0003_create_idempotency_keys": CreateIdempotencyKeys,
  "0004_create_rate_limits": CreateRateLimits,
  "0005_idempotency_in_pets": IdempotencyInPets,
  "0006_sqlite_prunes_by_id": SqlitePrunesById
}
