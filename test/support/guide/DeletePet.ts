/**
 * The worked example of `docs/extending.md`, whole: `DELETE /v1/pets/{petId}` declared (step 1), its statement and
 * repository method (step 2) and its registration (step 3). It is not part of the API petstore serves: here the
 * endpoint has a group of its own, served beside the catalogue's in `test/Guide.test.ts`, which also checks that the
 * guide's code blocks are lines of this file or of that test.
 */
import { HttpApi, type HttpApiBuilder, HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Effect, Schema } from "effect"
import { Authorization } from "../../../src/Auth/Api.js"
import { statement, Statements } from "../../../src/Database/Statements.js"
import { BadRequestResponse, NotFoundResponse, petNotFound, UnavailableResponse } from "../../../src/Domain/Errors.js"
import { PetId, PetIdFromString } from "../../../src/Domain/Pet.js"
import { PetsApi } from "../../../src/Pets/Api.js"
import { orUnavailable } from "../../../src/Unavailable.js"

/** Step 1: the endpoint, with what the catalogue's group declares for all its endpoints (503, the key and quota). */
export class DeletePetApi extends HttpApiGroup.make("deletePet", { topLevel: true })
  .add(
    HttpApiEndpoint.del("deletePet", "/pets/:petId")
      .setPath(Schema.Struct({ petId: PetIdFromString }))
      .addSuccess(HttpApiSchema.NoContent) // Schema.Void with status 204: no body
      .addError(BadRequestResponse) // a petId that is not a positive integer
      .addError(NotFoundResponse)
      .annotate(OpenApi.Summary, "Remove an animal")
  )
  .addError(UnavailableResponse)
  .middleware(Authorization)
{}

/** The API with the example: the catalogue's group and the example's. */
export class GuideApi extends HttpApi.make("petstore").add(PetsApi).add(DeletePetApi) {}

/** As the server mounts it, under `/v1`. */
export const ServedGuideApi = GuideApi.prefix("/v1")

/** Step 2: the statement, written once for both backends, its row's schema, and the repository method that runs it. */
const Deleted = Schema.Struct({ id: PetId })
const DELETE = statement<{ readonly id: PetId }, [PetId]>("DELETE FROM pets WHERE id = ? RETURNING id", Deleted)

export class GuideRepo extends Effect.Service<GuideRepo>()("test/GuideRepo", {
  dependencies: [Statements.Default],
  effect: Effect.gen(function*() {
    const { query } = yield* Statements
    const remove = (id: PetId) => query(DELETE, [id], (rows) => rows.length > 0)
    return { remove }
  })
}) {}

type DeletePetHandlers = typeof ServedGuideApi extends HttpApi.HttpApi<infer _, infer G, infer E, infer R>
  ? HttpApiBuilder.Handlers.FromGroup<E, R, HttpApiGroup.HttpApiGroup.WithName<G, "deletePet">>
  : never

/** Step 3: the registration, as `registerPets` is written in `src/Pets/Http.ts`. */
export const registerDeletePet = (handlers: DeletePetHandlers) =>
  Effect.gen(function*() {
    const repo = yield* GuideRepo
    return handlers
      .handle("deletePet", ({ path }) =>
        Effect.gen(function*() {
          const deleted = yield* orUnavailable(repo.remove(path.petId)) // a SqlError as the declared 503
          if (!deleted) return yield* petNotFound(path.petId) // the declared 404, as getPet answers it
        }))
  })
