/**
 * A middleware written as a direct face (`layerDirect`): the pipeline settles an outcome known at once before the
 * request's fiber starts and runs one that is not inside it; the HttpApi app runs the same face as the middleware's
 * effect. Every way gives the same answer, the same added headers and the same annotations on the request's line.
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
import { flatMapNow, matchNow } from "../src/Immediate.js"
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

class HelloApi extends HttpApiGroup.make("hello", { topLevel: true })
  .add(HttpApiEndpoint.get("hello", "/hello").addSuccess(Schema.Struct({ hello: Schema.String })))
  .middleware(Greeting)
{}
const TestApi = HttpApi.make("test").add(HelloApi)

const hello: GroupHandlers<typeof TestApi, "hello"> = {
  hello: () => Effect.map(Visitor, (visitor) => ({ hello: visitor }))
}

const testRoutes = Layer.mergeAll(
  HttpApiBuilder.api(TestApi).pipe(
    Layer.provide(HttpApiBuilder.group(TestApi, "hello", (handlers) => handlers.handle("hello", hello.hello))),
    Layer.provide(GreetingLive)
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
      const visitors = ["ann", "slow-bo", undefined, "slow-stranger"]
      const answers = (server: typeof pipeline) =>
        Effect.forEach(visitors, (visitor) =>
          Effect.promise(async () => {
            const headers: Record<string, string> = visitor === undefined ? {} : { "x-visitor": visitor }
            const response = await server(new Request(`${ORIGIN}/hello`, { headers }))
            return { status: response.status, greeted: response.headers.get("x-greeted"), body: await response.json() }
          }))
      const expected = [
        { status: 200, greeted: "ann", body: { hello: "ann" } },
        { status: 200, greeted: "slow-bo", body: { hello: "SLOW-BO" } },
        { status: 403, greeted: "nobody", body: { _tag: "Stranger", message: "Who are you?" } },
        { status: 403, greeted: "slow-stranger", body: { _tag: "Stranger", message: "Too late." } }
      ]
      expect(yield* answers(pipeline)).toEqual(expected)
      expect(yield* answers(app)).toEqual(expected)
      const named = ["ann", "slow-bo", "nobody", "slow-stranger"]
      expect(lines).toEqual([...named, ...named])
    }))
})

describe("effects that may already be done", () => {
  it.effect("stay done when they are, and compose as usual when they are not", () =>
    Effect.gen(function*() {
      const done = flatMapNow(Exit.succeed(1), (n) => Exit.succeed(n + 1))
      expect(Exit.isExit(done)).toBe(true)
      expect(yield* done).toBe(2)
      const later = flatMapNow(Effect.sync(() => 1), (n) => Exit.succeed(n + 1))
      expect(Exit.isExit(later)).toBe(false)
      expect(yield* later).toBe(2)

      const recovered = matchNow(Exit.fail("no"), { onFailure: (e) => Exit.succeed(`${e}!`), onSuccess: Exit.succeed })
      expect(Exit.isExit(recovered)).toBe(true)
      expect(yield* recovered).toBe("no!")
      const defect = matchNow(Exit.die("boom"), { onFailure: () => Exit.succeed("handled"), onSuccess: Exit.succeed })
      expect(yield* Effect.exit(defect)).toEqual(Exit.die("boom"))
      const failedLater = matchNow(Effect.suspend(() => Effect.fail("no")), {
        onFailure: (e) => Exit.succeed(`${e}?`),
        onSuccess: Exit.succeed
      })
      expect(yield* failedLater).toBe("no?")
    }))
})
