/**
 * Migrations are bundled into the executable (no files are read at run time). Keys are `<id>_<name>`.
 */
import CreatePets from "./0001_create_pets.js"
import CreateApiKeys from "./0002_create_api_keys.js"

export const migrations = {
  "0001_create_pets": CreatePets,
  "0002_create_api_keys": CreateApiKeys
}
