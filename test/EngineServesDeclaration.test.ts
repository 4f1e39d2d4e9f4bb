/**
 * The engine serves whatever an `HttpApiEndpoint` declares as `HttpApiBuilder` serves it, and runs handlers and
 * middleware as the plain effects they are. A test-only API — a bodyless `DELETE` answering 204, a `PUT` with a
 * payload, a handler returning a response of its own, middleware that provides a service or is optional, handlers built
 * with `Effect.when`, `Effect.retry`, `Effect.timeout` and `Effect.zipRight` around synchronous SQLite statements — is
 * served through the engine and through the library's own server, and both give the answers Effect's documentation
 * says.
 */
import {
  HttpApi,
  HttpApiBuilder,
  HttpApiEndpoint,
  type HttpApiError,
  HttpApiGroup,
  HttpApiMiddleware,
  HttpApiSchema,
  HttpRouter,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { Cause, Context, Duration, Effect, Exit, HashMap, Layer, Logger, Option, Schema, Scope, Stream } from "effect"
import { LongPoll } from "../src/Domain/LongPoll.js"
import { annotateRequest } from "../src/Operations/Logging.js"
import { addResponseHeaders } from "../src/ResponseHeaders.js"
import { RegisteredGroups, registerGroup } from "../src/Serving/Registration.js"
import type { WebHandler } from "../src/Serving/WebHandler.js"
import { engineServer } from "./support/engine.js"
import { ORIGIN } from "./support/http.js"
import { referenceServer } from "./support/reference.js"

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
  .add(HttpApiEndpoint.get("raced", "/raced").addSuccess(Schema.String))
  .add(HttpApiEndpoint.get("forked", "/forked").addSuccess(Schema.String))
  .add(HttpApiEndpoint.get("slowly", "/slowly").addSuccess(Schema.String))
  .add(HttpApiEndpoint.get("streamed", "/streamed").addSuccess(Schema.String))
  .add(HttpApiEndpoint.get("held", "/held").addSuccess(Schema.String).annotate(LongPoll, Duration.millis(500)))
  .add(HttpApiEndpoint.get("failTwice", "/fail-twice").addSuccess(Schema.String))
  .add(HttpApiEndpoint.get("selfInterrupted", "/self-interrupted").addSuccess(Schema.String))
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
  let interrupted = 0
  return {
    /** Whether thing `id` is stored; how many `slowly` requests were interrupted. */
    stored: (id: number) => things.has(id),
    interrupted: () => interrupted,
    /** A body streamed after the handler returned, in parts. */
    streamed: () =>
      Effect.map(
        Visitor,
        (visitor) => HttpServerResponse.stream(Stream.make("streamed ", "to ", visitor).pipe(Stream.encodeText))
      ),
    /** A long poll's shape: it waits by design, within what its `LongPoll` annotation declares. */
    held: () => Effect.as(Effect.sleep("300 millis"), "held"),
    slowly: () =>
      Effect.as(Effect.sleep("2 seconds"), "done").pipe(Effect.onInterrupt(() => Effect.sync(() => interrupted++))),
    /** A declared failure, then a defect while it unwinds. */
    failTwice: () =>
      Effect.fail(new Stranger({ message: "first" })).pipe(Effect.ensuring(Effect.die(new Error("then a defect")))),
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
    slow: () => Effect.as(Effect.sleep("1 hour"), "finished"),
    /** The loser of the race adds its header, then loses. */
    raced: () =>
      Effect.race(
        Effect.zipRight(addResponseHeaders({ "x-loser": "yes" }), Effect.as(Effect.never, "loser")),
        Effect.zipRight(Effect.sleep("2 millis"), Effect.as(addResponseHeaders({ "x-winner": "yes" }), "winner"))
      ),
    /** A fiber that adds a header and is never joined. */
    forked: () =>
      Effect.gen(function*() {
        yield* Effect.fork(addResponseHeaders({ "x-forked": "yes" }))
        yield* Effect.sleep("2 millis")
        return "main"
      }),
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

/** The group's registration: the one both servers run. `timedOut`'s timeout is written inline, around the handler. */
const registerThings = (things: ReturnType<typeof makeThings>) =>
(
  handlers: HttpApiBuilder.Handlers.FromGroup<HttpApiError.HttpApiDecodeError, never, typeof ThingsApi>
) =>
  handlers
    .handle("hello", things.hello)
    .handle("removeThing", things.removeThing)
    .handle("putThing", things.putThing)
    .handle("raw", things.raw)
    .handle("insertWhen", things.insertWhen)
    .handle("insertRetried", things.insertRetried)
    .handle("timedOut", () =>
      things.slow().pipe(
        Effect.timeoutTo({ duration: "5 millis", onTimeout: () => "timed out", onSuccess: (done) => done })
      ))
    .handle("inOrder", things.inOrder)
    .handle("raced", things.raced)
    .handle("forked", things.forked)
    .handle("slowly", things.slowly)
    .handle("held", things.held)
    .handle("streamed", things.streamed)
    .handle("failTwice", things.failTwice)
    .handle("selfInterrupted", () => Effect.interrupt)

const middlewareLive = Layer.mergeAll(GreetingLive, StampLive)

/** The engine on the registration, with the server's own routes given (none unless said). */
const engineOf = (
  things: ReturnType<typeof makeThings>,
  options: { readonly requestTimeout?: Duration.Duration; readonly ownRoutes?: Layer.Layer<never> } = {}
) =>
  engineServer(
    Layer.mergeAll(
      Layer.scoped(RegisteredGroups, Effect.all([registerGroup(TestApi, "things", registerThings(things))])),
      options.ownRoutes ?? Layer.empty
    ).pipe(Layer.provide(middlewareLive)),
    { requestTimeout: options.requestTimeout }
  )

/** The library's own server on the same registration. */
const referenceOf = (things: ReturnType<typeof makeThings>) =>
  referenceServer(
    HttpApiBuilder.api(TestApi).pipe(
      Layer.provide(HttpApiBuilder.group(TestApi, "things", registerThings(things))),
      Layer.provide(middlewareLive)
    )
  )

interface Sent {
  readonly method: string
  readonly path: string
  readonly headers?: Record<string, string>
  readonly body?: string
}

const requests: ReadonlyArray<
  readonly [Sent, { status: number; body: unknown; headers?: Record<string, string | null> }]
> = [
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
  [{ method: "POST", path: "/order", headers: { "x-visitor": "ann" } }, { status: 200, body: ["first", "statement"] }],
  [{ method: "GET", path: "/raced", headers: { "x-visitor": "ann" } }, {
    status: 200,
    body: "winner",
    headers: { "x-winner": "yes", "x-loser": null }
  }],
  [{ method: "GET", path: "/forked", headers: { "x-visitor": "ann" } }, {
    status: 200,
    body: "main",
    headers: { "x-forked": null }
  }],
  [{ method: "DELETE", path: "/things/abc", headers: { "x-visitor": "ann" } }, { status: 400, body: expect.anything() }]
]

describe("the engine against the library's own server, on a test-only API", () => {
  it.scopedLive("answers every request as Effect and HttpApiBuilder say, on both", () =>
    Effect.gen(function*() {
      const visitors: Array<unknown> = []
      const capture = Logger.make(({ annotations, message }) => {
        if ((Array.isArray(message) ? message[0] : message) === "request") {
          visitors.push(Option.getOrUndefined(HashMap.get(annotations, "visitor")))
        }
      })
      const servers = [
        ["engine", yield* engineOf(makeThings()).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, capture)))],
        ["library", yield* referenceOf(makeThings())]
      ] as const
      for (const [name, server] of servers) {
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
          expect(seen, `${name}: ${sent.method} ${sent.path}`).toEqual({
            headers: {},
            ...expected
          })
        }
      }
      // The engine's request lines name the visitor its middleware annotated.
      expect(visitors).toEqual(["ann", "slow-bo", "nobody", ...requests.slice(3).map(() => "ann")])
    }))
})

describe("the rules the engine keeps, once for every request", () => {
  /** The engine with a log capture: the message and the cause of every line. */
  const captured = () => {
    const lines: Array<{ readonly message: unknown; readonly cause: string }> = []
    const logger = Logger.make(({ cause, message }) => {
      lines.push({ message: Array.isArray(message) ? message[0] : message, cause: Cause.pretty(cause) })
    })
    return { lines, logger: Logger.replace(Logger.defaultLogger, logger) }
  }
  const send = (server: WebHandler["Type"], path: string, init: RequestInit = {}) =>
    Effect.promise(async () => {
      const response = await server(
        new Request(`${ORIGIN}${path}`, { ...init, headers: { "x-visitor": "ann", ...init.headers } })
      )
      return { status: response.status, body: await response.json() }
    })

  it.scopedLive("REQUEST_TIMEOUT: an endpoint and one of the server's own routes past it are both 503, a long poll's later", () =>
    Effect.gen(function*() {
      const ownRoutes = HttpRouter.Default.use((router) =>
        router.get("/slow-own", Effect.as(Effect.sleep("2 seconds"), HttpServerResponse.text("late")))
      )
      const server = yield* engineOf(makeThings(), { requestTimeout: Duration.millis(100), ownRoutes })
      for (const path of ["/slowly", "/slow-own"]) {
        const answer = yield* send(server, path)
        expect({ path, ...answer }).toEqual({
          path,
          status: 503,
          body: { code: "unavailable", message: expect.stringContaining("did not finish"), status: 503 }
        })
      }
      // An endpoint that holds a request by design (`LongPoll`) has its deadline REQUEST_TIMEOUT past its hold.
      expect(yield* send(server, "/held")).toEqual({ status: 200, body: "held" })
    }))

  it.scopedLive("a response the handler made with a streamed body is answered as it streams", () =>
    Effect.gen(function*() {
      const server = yield* engineOf(makeThings())
      const response = yield* Effect.promise(() =>
        Promise.resolve(server(new Request(`${ORIGIN}/streamed`, { headers: { "x-visitor": "ann" } })))
      )
      expect(response.status).toBe(200)
      expect(yield* Effect.promise(() => response.text())).toBe("streamed to ann")
    }))

  it.scopedLive("a body on a request whose endpoint declares none is refused, however the request says so", () =>
    Effect.gen(function*() {
      const things = makeThings()
      const server = yield* engineOf(things)
      // Made in process: no Content-Length, a body all the same.
      const answer = yield* send(server, "/things/1", { method: "DELETE", body: "{}" })
      expect(answer).toMatchObject({ status: 400, body: { code: "bad_request" } })
      expect(things.stored(1)).toBe(true)
      expect(yield* send(server, "/things/abc", { method: "DELETE" })).toMatchObject({
        status: 400,
        body: { code: "invalid_path" }
      })
    }))

  it.scopedLive("a defect anywhere in a cause is a 500, logged with the whole cause; an interruption it made is logged too", () =>
    Effect.gen(function*() {
      const { lines, logger } = captured()
      const server = yield* engineOf(makeThings()).pipe(Effect.provide(logger))
      expect(yield* send(server, "/fail-twice")).toEqual({
        status: 500,
        body: { code: "internal_error", message: expect.any(String), status: 500 }
      })
      // An interruption it made is a 503, as the library's server answers it.
      expect(yield* send(server, "/self-interrupted")).toEqual({
        status: 503,
        body: { code: "unavailable", message: expect.stringContaining("interrupted"), status: 503 }
      })
      const failures = lines.filter((line) => line.message === "unexpected failure")
      expect(failures).toHaveLength(2)
      expect(failures[0].cause).toContain("first")
      expect(failures[0].cause).toContain("then a defect")
      expect(failures[1].cause).toContain("interrupted")
    }))

  it.live("closing the server's scope interrupts the requests in flight: 503 shutting down, nothing left running", () =>
    Effect.gen(function*() {
      const things = makeThings()
      const scope = yield* Scope.make()
      const server = yield* engineOf(things).pipe(Scope.extend(scope))
      const pending = server(new Request(`${ORIGIN}/slowly`, { headers: { "x-visitor": "ann" } }))
      expect(pending).toBeInstanceOf(Promise)
      yield* Effect.sleep("10 millis")
      yield* Scope.close(scope, Exit.void)
      expect(things.interrupted()).toBe(1)
      const response = yield* Effect.promise(async () => pending)
      expect({ status: response.status, body: yield* Effect.promise(() => response.json()) }).toEqual({
        status: 503,
        body: { code: "unavailable", message: "The server is shutting down.", status: 503 }
      })
    }))
})
