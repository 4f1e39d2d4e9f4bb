/**
 * Where the layers meet the server: the groups' registrations with what their handlers need, the server's own routes,
 * and the engine's web handler over them (`Serving/WebHandler.ts`).
 */
import { Effect, Layer } from "effect"
import { ServedApi, type Servers } from "./Api.js"
import { ApiKeys } from "./Auth/ApiKeys.js"
import { AuthorizationLive } from "./Auth/Http.js"
import { PetsDependencies, registerPets } from "./Pets/Http.js"
import { PetsRepo } from "./Pets/Repo.js"
import { RegisteredGroups, registerGroup } from "./Serving/Registration.js"
import { webHandlerFrom, type WebHandlerOptions } from "./Serving/WebHandler.js"
import { DocsLive, SystemRoutesLive } from "./System.js"

/** The API's groups as their registrations hand them over, given what the handlers and middleware need. */
export const GroupsLive = Layer.scoped(RegisteredGroups, Effect.all([registerGroup(ServedApi, "pets", registerPets)]))
  .pipe(Layer.provide([PetsDependencies, AuthorizationLive]))

/** Everything that answers requests, given the repositories, the lifecycle and a SQL client. */
export const RoutesLive = (servers: Servers) => Layer.mergeAll(GroupsLive, SystemRoutesLive(servers), DocsLive(servers))

export interface AppOptions extends WebHandlerOptions {
  readonly servers: Servers
}

/** The web handler of the whole application; needs the lifecycle and a SQL client. */
export const WebHandlerLive = (options: AppOptions) =>
  webHandlerFrom(RoutesLive(options.servers).pipe(Layer.provide([PetsRepo.Default, ApiKeys.Default])), options)
