/**
 * A middleware written as a direct face (`layerDirect`): the pipeline settles an outcome known at once before the
 * request's fiber starts and runs one that is not inside it; the HttpApi app runs the same face as the middleware's
 * effect. Every way gives the same answer, the same added headers and the same annotations on the request's line, for
 * a middleware that provides a service and for an optional one.
 */
import {
  HttpApi,
  HttpApiBuilder,
  HttpApiEndpoint,
  HttpApiGroup,
  HttpApiMiddleware,
  HttpApiSchema
} from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, HashMap, Layer, Logger, Option, Schema } from "effect"
import { WebHandler, webHandlerFrom } from "../src/Http.js"
import { ApiHandlers, apiHandlers, type GroupHandlers } from "../src/Serving/Handlers.js"
import { layerDirect } from "../src/Serving/Middleware.js"
import * as Sql from "../src/Sql.js"
import { ORIGIN } from "./support/http.js"

class Visitor extends Context.Tag("test/Visitor")<Visitor, string>() {}

class Stranger extends Schema.TaggedError<Stranger>()(
  "Stranger",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 403 })
) {}

class Greeting extends HttpApiMiddleware.Tag<Greeting>()("test/Greeting", { provides: Visitor, failure: Stranger }) {}

/**
 * The visitor named by `x-visitor`: known at once, or (a name starting with `slow`) only after a timer; no name, or
 * `slow-stranger`, is a 403. Every answer says whom it greeted, and the request's line names the visitor.
 */
const GreetingLive = layerDirect(
  Greeting,
  Effect.succeed((request) => {
    const name = request.headers.get("x-visitor") ?? undefined
    request.answerHeaders["x-greeted"] = name ?? "nobody"
    request.annotations.visitor = name ?? "nobody"
    if (name === undefined) return Exit.fail(new Stranger({ message: "Who are you?" }))
    if (!name.startsWith("slow")) return Exit.succeed(name)
    return Effect.sleep("1 millis").pipe(
      Effect.zipRight(
        name === "slow-stranger"
          ? Effect.fail(new Stranger({ message: "Too late." }))
          : Effect.succeed(name.toUpperCase())
      )
    )
  })
)

/** An optional middleware: a failure of it lets the request go on. `x-stamp: fail` fails at once, `slow-fail` later. */
class Stamp extends HttpApiMiddleware.Tag<Stamp>()("test/Stamp", { optional: true, failure: Stranger }) {}

const StampLive = layerDirect(
  Stamp,
  Effect.succeed((request) => {
    const stamp = request.headers.get("x-stamp")
    request.answerHeaders["x-stamped"] = stamp ?? "yes"
    if (stamp === "fail") return Exit.fail(new Stranger({ message: "No stamp." }))
    if (stamp === "slow-fail") {
      return Effect.sleep("1 millis").pipe(Effect.zipRight(Effect.fail(new Stranger({ message: "No stamp." }))))
    }
    return Exit.void
  })
)

class HelloApi extends HttpApiGroup.make("hello", { topLevel: true })
  .add(HttpApiEndpoint.get("hello", "/hello").addSuccess(Schema.Struct({ hello: Schema.String })).middleware(Stamp))
  .middleware(Greeting)
{}
const TestApi = HttpApi.make("test").add(HelloApi)

const hello: GroupHandlers<typeof TestApi, "hello"> = {
  hello: () => Effect.map(Visitor, (visitor) => ({ hello: visitor }))
}

const testRoutes = Layer.mergeAll(
  HttpApiBuilder.api(TestApi).pipe(
    Layer.provide(HttpApiBuilder.group(TestApi, "hello", (handlers) => handlers.handle("hello", hello.hello))),
    Layer.provide([GreetingLive, StampLive])
  ),
  Layer.succeed(ApiHandlers, apiHandlers(TestApi, { hello }))
)

describe("a middleware's direct face", () => {
  it.scopedLive("answers alike through the pipeline (at once or in the fiber) and the HttpApi app", () =>
    Effect.gen(function*() {
      const lines: Array<unknown> = []
      const capture = Logger.make(({ annotations, message }) => {
        if ((Array.isArray(message) ? message[0] : message) === "request") {
          lines.push(Option.getOrUndefined(HashMap.get(annotations, "visitor")))
        }
      })
      const serve = (pipeline: boolean) =>
        Effect.map(
          Layer.build(
            webHandlerFrom(testRoutes, { corsOrigins: Option.none(), pipeline }).pipe(
              Layer.provide([Sql.SqlTest, Logger.replace(Logger.defaultLogger, capture)])
            )
          ),
          (context) => Context.get(context, WebHandler)
        )
      const pipeline = yield* serve(true)
      const app = yield* serve(false)
      // Each request: the visitor (none: a 403 from Greeting), and the optional Stamp's header (its failures let it on).
      // Stamp is the endpoint's middleware, so it runs around the group's Greeting: first.
      const requests: ReadonlyArray<readonly [string | undefined, string | undefined]> = [
        ["ann", undefined],
        ["slow-bo", undefined],
        [undefined, undefined],
        ["slow-stranger", undefined],
        ["cy", "fail"],
        ["slow-di", "slow-fail"]
      ]
      const answers = (server: typeof pipeline) =>
        Effect.forEach(requests, ([visitor, stamp]) =>
          Effect.promise(async () => {
            const headers: Record<string, string> = {}
            if (visitor !== undefined) headers["x-visitor"] = visitor
            if (stamp !== undefined) headers["x-stamp"] = stamp
            const response = await server(new Request(`${ORIGIN}/hello`, { headers }))
            return {
              status: response.status,
              greeted: response.headers.get("x-greeted"),
              stamped: response.headers.get("x-stamped"),
              body: await response.json()
            }
          }))
      const expected = [
        { status: 200, greeted: "ann", stamped: "yes", body: { hello: "ann" } },
        { status: 200, greeted: "slow-bo", stamped: "yes", body: { hello: "SLOW-BO" } },
        { status: 403, greeted: "nobody", stamped: "yes", body: { _tag: "Stranger", message: "Who are you?" } },
        { status: 403, greeted: "slow-stranger", stamped: "yes", body: { _tag: "Stranger", message: "Too late." } },
        { status: 200, greeted: "cy", stamped: "fail", body: { hello: "cy" } },
        { status: 200, greeted: "slow-di", stamped: "slow-fail", body: { hello: "SLOW-DI" } }
      ]
      expect(yield* answers(pipeline)).toEqual(expected)
      expect(yield* answers(app)).toEqual(expected)
      const named = ["ann", "slow-bo", "nobody", "slow-stranger", "cy", "slow-di"]
      expect(lines).toEqual([...named, ...named])
    }))
})
