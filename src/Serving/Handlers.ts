/**
 * The handlers of an API, by group and endpoint, typed by the declaration: each is exactly the handler
 * `HttpApiBuilder.group(...).handle(name, handler)` accepts for that endpoint (its request, success and errors, and the
 * services its middleware provide, such as `CurrentApiKey`). The HttpApi app and the request pipeline call the same
 * functions. The pipeline calls a handler at once, outside any fiber, when its middleware settled at once
 * (`Immediate.callAtOnce`): a handler whose outcome is an `Exit` is answered without a fiber. Work that can be done on
 * the spot is then done when its effect is made, so a handler makes each effect after what must precede it
 * (`flatMapNow`, `tapResponseHeaders`), and only the effects it runs.
 */
import type { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpServerRequest } from "@effect/platform"
import { Context, type Effect } from "effect"

type GroupsOf<Api> = Api extends HttpApi.HttpApi<infer _Id, infer Groups, infer _E, infer _R> ? Groups : never
type ErrorOf<Api> = Api extends HttpApi.HttpApi<infer _Id, infer _Groups, infer E, infer _R> ? E : never

/** What the middleware of a group and of an endpoint provide to its handler. */
type Provided<Group extends HttpApiGroup.HttpApiGroup.Any, Endpoint extends HttpApiEndpoint.HttpApiEndpoint.Any> =
  | HttpApiGroup.HttpApiGroup.Provides<Group>
  | HttpApiMiddleware.HttpApiMiddleware.ExtractProvides<HttpApiEndpoint.HttpApiEndpoint.Context<Endpoint>>

/** The handlers of one group of `Api`, by endpoint name. */
export type GroupHandlers<Api extends HttpApi.HttpApi.Any, Name extends string> = {
  readonly [
    Endpoint in HttpApiGroup.HttpApiGroup.EndpointsWithName<GroupsOf<Api>, Name> as Endpoint["name"]
  ]: HttpApiEndpoint.HttpApiEndpoint.Handler<
    Endpoint,
    ErrorOf<Api> | HttpApiGroup.HttpApiGroup.ErrorWithName<GroupsOf<Api>, Name>,
    Provided<HttpApiGroup.HttpApiGroup.WithName<GroupsOf<Api>, Name>, Endpoint>
  >
}

/** The handlers of every group of `Api`. */
export type Implementation<Api extends HttpApi.HttpApi.Any> = {
  readonly [Name in GroupsOf<Api>["identifier"]]: GroupHandlers<Api, Name>
}

/** A request as the pipeline decodes it for a handler: the parts the endpoint declares, and the request itself. */
export interface DecodedRequest {
  path?: unknown
  urlParams?: unknown
  payload?: unknown
  headers?: unknown
  request: HttpServerRequest.HttpServerRequest
}

/** A handler as the pipeline calls it: the decoders derived from the same declaration make the request it expects. */
export type AnyHandler = (request: DecodedRequest) => Effect.Effect<unknown, unknown, unknown>

/** The handlers the pipeline serves, by group and endpoint name. */
export class ApiHandlers extends Context.Tag("Serving/ApiHandlers")<
  ApiHandlers,
  Readonly<Record<string, Readonly<Record<string, AnyHandler>>>>
>() {}

/** The handlers of `api`, checked against its declaration, as the pipeline takes them. */
export const apiHandlers = <Api extends HttpApi.HttpApi.Any>(
  _api: Api,
  implementation: Implementation<Api>
): Context.Tag.Service<ApiHandlers> =>
  // The one place the declaration's types are set aside: each handler is called only with the request that the
  // decoders derived from its own endpoint produce (`Derive.ts`).
  implementation as unknown as Context.Tag.Service<ApiHandlers>
