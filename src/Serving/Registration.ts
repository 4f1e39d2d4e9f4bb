/**
 * What the engine serves: the handlers a group's registration hands over — the function given to
 * `HttpApiBuilder.group(api, name, (handlers) => handlers.handle(...))` — with the context the registration was built
 * in (the services its handlers close over, its middleware implementations). The same function registers the group
 * with `HttpApiBuilder` itself (`HttpApiBuilder.group(api, name, registration)`, the library's reference server in the
 * tests), so what `handle` type-checks against the declaration is exactly what the engine runs.
 */
import { type HttpApi, HttpApiBuilder, type HttpApiGroup } from "@effect/platform"
import { Context, Effect, Layer, Ref } from "effect"
import type { Scope } from "effect/Scope"

/** A group's handlers as its registration handed them over, and the context the registration ran in. */
export interface RegisteredGroup {
  readonly api: HttpApi.HttpApi.AnyWithProps
  readonly handlers: HttpApiBuilder.Handlers<unknown, unknown, unknown>
  readonly context: Context.Context<never>
}

/** The groups the engine serves. */
export class RegisteredGroups extends Context.Tag("Serving/RegisteredGroups")<
  RegisteredGroups,
  ReadonlyArray<RegisteredGroup>
>() {}

type Build = (handlers: HttpApiBuilder.Handlers<unknown, unknown, unknown>) => unknown

/**
 * Runs a group's registration as `HttpApiBuilder.group` runs it — the library makes the `handlers` it is given and
 * collects what `handle` adds — and keeps what it hands over. Same parameters and checks as `HttpApiBuilder.group`.
 */
export const registerGroup = <
  ApiId extends string,
  Groups extends HttpApiGroup.HttpApiGroup.Any,
  ApiError,
  ApiR,
  const Name extends HttpApiGroup.HttpApiGroup.Name<Groups>,
  Return
>(
  api: HttpApi.HttpApi<ApiId, Groups, ApiError, ApiR>,
  groupName: Name,
  build: (
    handlers: HttpApiBuilder.Handlers.FromGroup<ApiError, ApiR, HttpApiGroup.HttpApiGroup.WithName<Groups, Name>>
  ) => HttpApiBuilder.Handlers.ValidateReturn<Return>
): Effect.Effect<
  RegisteredGroup,
  HttpApiBuilder.Handlers.Error<Return>,
  HttpApiBuilder.Handlers.Context<Return> | HttpApiGroup.HttpApiGroup.MiddlewareWithName<Groups, Name> | Scope
> =>
  Effect.gen(function*() {
    const registered = yield* Ref.make<RegisteredGroup | undefined>(undefined)
    const keep = (handlers: HttpApiBuilder.Handlers<unknown, unknown, unknown>) =>
      Effect.flatMap(
        Effect.context<never>(),
        (context) => Ref.set(registered, { api: api as unknown as HttpApi.HttpApi.AnyWithProps, handlers, context })
      )
    // The library's own registration, on a router of its own that nothing serves, in the caller's scope (the scope a
    // handler finds in its context, as the library's group layer gives it).
    yield* Layer.build(HttpApiBuilder.group(api, groupName, (handlers) => {
      const result = (build as unknown as Build)(handlers as never)
      return (Effect.isEffect(result)
        ? Effect.tap(result as Effect.Effect<HttpApiBuilder.Handlers<unknown, unknown, unknown>>, keep)
        : Effect.as(keep(result as HttpApiBuilder.Handlers<unknown, unknown, unknown>), result)) as never
    }))
    return (yield* Ref.get(registered))!
  }) as never
