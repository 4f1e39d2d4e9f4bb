/**
 * The engine serves whatever an `HttpApiEndpoint` declares as `HttpApiBuilder` serves it, and runs handlers and
 * middleware as the plain effects they are. A test-only API — a bodyless `DELETE` answering 204, a `PUT` with a
 * payload, a handler returning a response of its own, middleware that provides a service or is optional, handlers built
 * with `Effect.when`, `Effect.retry`, `Effect.timeout` and `Effect.zipRight` around synchronous SQLite statements — is
 * served through the engine and through the HttpApi app, and both give the answers Effect's documentation says.
 */
import {
  HttpApi,
  HttpApiBuilder,
  HttpApiEndpoint,
  HttpApiGroup,
  HttpApiMiddleware,
  HttpApiSchema,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { Context, Effect, HashMap, Layer, Logger, Option, Schema } from "effect"
import * as Sql from "../src/Database/Sql.js"
import { annotateRequest } from "../src/Operations/Logging.js"
import { addResponseHeaders } from "../src/ResponseHeaders.js"
import { ApiHandlers } from "../src/Serving/Handlers.js"
import { WebHandler, webHandlerFrom } from "../src/Serving/WebHandler.js"
import { ORIGIN } from "./support/http.js"

class Visitor extends Context.Tag("test/Visitor")<Visitor, string>() {}

class Stranger extends Schema.TaggedError<Stranger>()(
  "Stranger",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 403 })
) {}

class StatementFailed extends Schema.TaggedError<StatementFailed>()(
  "StatementFailed",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 500 })
) {}

/** The visitor named by `x-visitor` (a name starting with `slow` after a timer); no name is a 403. */
class Greeting extends HttpApiMiddleware.Tag<Greeting>()("test/Greeting", { provides: Visitor, failure: Stranger }) {}

const GreetingLive = Layer.succeed(
  Greeting,
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const name = request.headers["x-visitor"]
    yield* addResponseHeaders({ "x-greeted": name ?? "nobody" })
    yield* annotateRequest("visitor", name ?? "nobody")
    if (name === undefined) return yield* new Stranger({ message: "Who are you?" })
    if (name.startsWith("slow")) yield* Effect.sleep("1 millis")
    return name
  })
)

/** An optional middleware: its failure (`x-stamp: fail`) lets the request go on. */
class Stamp extends HttpApiMiddleware.Tag<Stamp>()("test/Stamp", { optional: true, failure: Stranger }) {}

const StampLive = Layer.succeed(
  Stamp,
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const stamp = request.headers["x-stamp"]
    yield* addResponseHeaders({ "x-stamped": stamp ?? "yes" })
    if (stamp === "fail") return yield* new Stranger({ message: "No stamp." })
  })
)

const Thing = Schema.Struct({ id: Schema.Int, name: Schema.String })
const Count = Schema.Struct({ count: Schema.Int })
const thingPath = Schema.Struct({ id: Schema.NumberFromString.pipe(Schema.int()) })

class ThingsApi extends HttpApiGroup.make("things", { topLevel: true })
  .add(HttpApiEndpoint.get("hello", "/hello").addSuccess(Schema.Struct({ hello: Schema.String })).middleware(Stamp))
  .add(HttpApiEndpoint.del("removeThing", "/things/:id").setPath(thingPath).addSuccess(HttpApiSchema.NoContent))
  .add(
    HttpApiEndpoint.put("putThing", "/things/:id").setPath(thingPath).setPayload(Schema.Struct({ name: Schema.String }))
      .addSuccess(Thing)
  )
  .add(HttpApiEndpoint.get("raw", "/raw").addSuccess(Schema.String))
  .add(HttpApiEndpoint.post("insertWhen", "/when").addSuccess(Count))
  .add(HttpApiEndpoint.post("insertRetried", "/retry").addSuccess(Count).addError(StatementFailed))
  .add(HttpApiEndpoint.get("timedOut", "/timeout").addSuccess(Schema.String))
  .add(HttpApiEndpoint.post("inOrder", "/order").addSuccess(Schema.Array(Schema.String)))
  .middleware(Greeting)
{}
const TestApi = HttpApi.make("test").add(ThingsApi)

/** Handlers over an in-memory SQLite table, with statements run synchronously by `bun:sqlite` (`Effect.try`). */
const makeThings = () => {
  const db = new Database(":memory:")
  db.run("CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT)")
  const insert = (name: string) =>
    Effect.orDie(Effect.try(() => db.run("INSERT INTO things (name) VALUES (?)", [name])))
  const count = Effect.orDie(
    Effect.try(() => (db.query("SELECT count(*) AS count FROM things").get() as { count: number }).count)
  )
  let failures = 1
  /** A statement that fails once, then succeeds. */
  const flaky = Effect.try({
    try: () => {
      if (failures-- > 0) throw new Error("SQLITE_BUSY")
      return db.run("INSERT INTO things (name) VALUES ('flaky')")
    },
    catch: () => new StatementFailed({ message: "busy" })
  })
  const things = new Map<number, string>([[1, "one"]])
  return {
    hello: () => Effect.map(Visitor, (visitor) => ({ hello: visitor })),
    removeThing: ({ path }: { readonly path: { readonly id: number } }) =>
      Effect.sync(() => void things.delete(path.id)),
    putThing: (
      { path, payload }: { readonly path: { readonly id: number }; readonly payload: { readonly name: string } }
    ) =>
      Effect.sync(() => {
        things.set(path.id, payload.name)
        return { id: path.id, name: payload.name }
      }),
    raw: () =>
      Effect.succeed(
        HttpServerResponse.text("made by hand", { status: 203, headers: { "x-raw": "yes" } })
      ),
    insertWhen: () =>
      Effect.gen(function*() {
        yield* Effect.when(insert("never"), () => false)
        return { count: yield* count }
      }),
    insertRetried: () =>
      Effect.gen(function*() {
        yield* Effect.retry(flaky, { times: 1 })
        failures = 1
        return { count: yield* count }
      }),
    timedOut: () =>
      Effect.sleep("1 hour").pipe(
        Effect.as("finished"),
        Effect.timeoutTo({ duration: "5 millis", onTimeout: () => "timed out", onSuccess: (done) => done })
      ),
    inOrder: () =>
      Effect.gen(function*() {
        const events: Array<string> = []
        yield* Effect.zipRight(
          Effect.sleep("2 millis").pipe(Effect.tap(() => events.push("first"))),
          Effect.map(count, () => events.push("statement"))
        )
        return events
      })
  }
}

const routesOf = (things: ReturnType<typeof makeThings>) =>
  Layer.mergeAll(
    HttpApiBuilder.api(TestApi).pipe(
      Layer.provide(
        HttpApiBuilder.group(TestApi, "things", (handlers) =>
          handlers
            .handle("hello", things.hello)
            .handle("removeThing", things.removeThing)
            .handle("putThing", things.putThing)
            .handle("raw", things.raw)
            .handle("insertWhen", things.insertWhen)
            .handle("insertRetried", things.insertRetried)
            .handle("timedOut", things.timedOut)
            .handle("inOrder", things.inOrder))
      ),
      Layer.provide([GreetingLive, StampLive])
    ),
    Layer.succeed(ApiHandlers, { things: things as never })
  )

interface Sent {
  readonly method: string
  readonly path: string
  readonly headers?: Record<string, string>
  readonly body?: string
}

const requests: ReadonlyArray<readonly [Sent, { status: number; body: unknown; headers?: Record<string, string> }]> = [
  [{ method: "GET", path: "/hello", headers: { "x-visitor": "ann" } }, {
    status: 200,
    body: { hello: "ann" },
    headers: { "x-greeted": "ann", "x-stamped": "yes" }
  }],
  [{ method: "GET", path: "/hello", headers: { "x-visitor": "slow-bo", "x-stamp": "fail" } }, {
    status: 200,
    body: { hello: "slow-bo" },
    headers: { "x-greeted": "slow-bo", "x-stamped": "fail" }
  }],
  [{ method: "GET", path: "/hello" }, {
    status: 403,
    body: { _tag: "Stranger", message: "Who are you?" },
    headers: { "x-greeted": "nobody" }
  }],
  [{ method: "DELETE", path: "/things/1", headers: { "x-visitor": "ann" } }, { status: 204, body: "" }],
  [{
    method: "PUT",
    path: "/things/2",
    headers: { "x-visitor": "ann", "content-type": "application/json" },
    body: "{\"name\":\"two\"}"
  }, {
    status: 200,
    body: { id: 2, name: "two" }
  }],
  [{ method: "GET", path: "/raw", headers: { "x-visitor": "ann" } }, {
    status: 203,
    body: "made by hand",
    headers: { "x-raw": "yes", "x-greeted": "ann" }
  }],
  [{ method: "POST", path: "/when", headers: { "x-visitor": "ann" } }, { status: 200, body: { count: 0 } }],
  [{ method: "POST", path: "/retry", headers: { "x-visitor": "ann" } }, { status: 200, body: { count: 1 } }],
  [{ method: "GET", path: "/timeout", headers: { "x-visitor": "ann" } }, { status: 200, body: "timed out" }],
  [{ method: "POST", path: "/order", headers: { "x-visitor": "ann" } }, { status: 200, body: ["first", "statement"] }]
]

describe("the engine against the HttpApi app, on a test-only API", () => {
  it.scopedLive("answers every request as Effect and HttpApiBuilder say, on both paths", () =>
    Effect.gen(function*() {
      const visitors: Array<unknown> = []
      const capture = Logger.make(({ annotations, message }) => {
        if ((Array.isArray(message) ? message[0] : message) === "request") {
          visitors.push(Option.getOrUndefined(HashMap.get(annotations, "visitor")))
        }
      })
      const serve = (pipeline: boolean) =>
        Effect.map(
          Layer.build(
            webHandlerFrom(routesOf(makeThings()), { corsOrigins: Option.none(), pipeline }).pipe(
              Layer.provide([Sql.SqlTest, Logger.replace(Logger.defaultLogger, capture)])
            )
          ),
          (context) => Context.get(context, WebHandler)
        )
      for (const pipeline of [true, false]) {
        const server = yield* serve(pipeline)
        for (const [sent, expected] of requests) {
          const response = yield* Effect.promise(async () =>
            server(
              new Request(`${ORIGIN}${sent.path}`, {
                method: sent.method,
                headers: sent.headers ?? {},
                ...(sent.body === undefined ? {} : { body: sent.body })
              })
            )
          )
          const text = yield* Effect.promise(() => response.text())
          const seen = {
            status: response.status,
            body: response.headers.get("content-type")?.includes("json") ? JSON.parse(text) : text,
            headers: Object.fromEntries(
              Object.keys(expected.headers ?? {}).map((name) => [name, response.headers.get(name)])
            )
          }
          expect(seen, `${pipeline ? "engine" : "app"}: ${sent.method} ${sent.path}`).toEqual({
            headers: {},
            ...expected
          })
        }
      }
      const named = ["ann", "slow-bo", "nobody", "ann", "ann", "ann", "ann", "ann", "ann", "ann"]
      expect(visitors).toEqual([...named, ...named])
    }))
})
