/**
 * The outcomes a handler can have, served by the engine as the library's own server serves them from the same
 * declaration and registration: a request's own `Scope` (what a handler acquires, adds as a finalizer or forks in it
 * is released when its answer is made, a streamed body's when the stream ends).
 */
import {
  HttpApi,
  HttpApiBuilder,
  HttpApiEndpoint,
  type HttpApiError,
  HttpApiGroup,
  HttpApp,
  HttpServerResponse
} from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Context, Duration, Effect, Exit, type Fiber, Layer, Logger, Option, Schema, Stream } from "effect"
import * as Sql from "../src/Database/Sql.js"
import { RegisteredGroups, registerGroup } from "../src/Serving/Registration.js"
import { WebHandler, webHandlerFrom } from "../src/Serving/WebHandler.js"
import { ORIGIN } from "./support/http.js"
import { referenceServer } from "./support/reference.js"

const Item = Schema.Struct({ id: Schema.Int, name: Schema.String })

class OutcomesApi extends HttpApiGroup.make("outcomes", { topLevel: true })
  .add(HttpApiEndpoint.get("acquired", "/acquired").addSuccess(Schema.String))
  .add(HttpApiEndpoint.get("finalized", "/finalized").addSuccess(Schema.String))
  .add(HttpApiEndpoint.get("forkedScoped", "/forked-scoped").addSuccess(Schema.String))
  .add(HttpApiEndpoint.get("streamedScoped", "/streamed-scoped").addSuccess(Schema.String))
  .add(HttpApiEndpoint.get("streamedEndless", "/streamed-endless").addSuccess(Schema.String))
  .add(HttpApiEndpoint.get("changes", "/pets/changes").addSuccess(Schema.String))
  .add(
    HttpApiEndpoint.del("removePet", "/pets/:petId").setPath(Schema.Struct({ petId: Schema.NumberFromString }))
      .addSuccess(Schema.String)
  )
  .add(HttpApiEndpoint.get("heldScoped", "/held-scoped").addSuccess(Schema.String))
  .add(HttpApiEndpoint.get("brokenPreResponse", "/broken-pre-response").addSuccess(Schema.String))
  .add(HttpApiEndpoint.get("extraField", "/extra-field").addSuccess(Item))
  .add(HttpApiEndpoint.get("extraFields", "/extra-fields").addSuccess(Schema.Array(Item)))
  .add(HttpApiEndpoint.get("refusedValue", "/refused-value").addSuccess(Item))
  .add(HttpApiEndpoint.get("ownParseError", "/own-parse-error").addSuccess(Schema.Int))
  .add(HttpApiEndpoint.get("selfInterrupted", "/self-interrupted").addSuccess(Schema.String))
  .add(
    HttpApiEndpoint.post("signed", "/signed").setPayload(Schema.Struct({ name: Schema.String })).addSuccess(
      Schema.Struct({ name: Schema.String, sent: Schema.String })
    )
  )
{}
const TestApi = HttpApi.make("outcomes").add(OutcomesApi)

/** What the handlers did with their request's scope: each count goes up once per request. */
const makeEvents = () => ({ acquired: 0, released: 0, finalized: 0, forked: [] as Array<Fiber.RuntimeFiber<never>> })
type Events = ReturnType<typeof makeEvents>

const registerOutcomes = (events: Events) =>
(
  handlers: HttpApiBuilder.Handlers.FromGroup<HttpApiError.HttpApiDecodeError, never, typeof OutcomesApi>
) => {
  const resource = Effect.acquireRelease(
    Effect.sync(() => events.acquired++),
    () => Effect.sync(() => events.released++)
  )
  return handlers
    .handle("acquired", () => Effect.as(resource, "acquired"))
    .handle("finalized", () => Effect.as(Effect.addFinalizer(() => Effect.sync(() => events.finalized++)), "added"))
    .handle("forkedScoped", () =>
      Effect.map(Effect.forkScoped(Effect.never), (fiber) => {
        events.forked.push(fiber)
        return "forked"
      }))
    // A row with a column the schema does not name, its fields in another order; a value the schema refuses.
    .handle("extraField", () => Effect.succeed({ secret: "s3cret", name: "one", id: 1 }))
    .handle("extraFields", () => Effect.succeed([{ secret: "s3cret", name: "one", id: 1 }]))
    .handle("refusedValue", () => Effect.succeed({ id: 1.5, name: "half" }))
    // A failure the declaration does not name, as a handler that decodes something itself may fail.
    .handle("ownParseError", () => Schema.decodeUnknown(Schema.Int)("not a number") as Effect.Effect<number>)
    .handle("selfInterrupted", () => Effect.interrupt)
    .handle(
      "signed",
      ({ payload, request }) => Effect.map(Effect.orDie(request.text), (sent) => ({ name: payload.name, sent }))
    )
    // A body that never ends by itself, as a feed's stream: its client cancelling it ends it.
    .handle("streamedEndless", () =>
      Effect.map(resource, () =>
        HttpServerResponse.stream(
          Stream.concat(Stream.make("first"), Stream.fromEffect(Effect.never)).pipe(Stream.encodeText)
        )))
    .handle("changes", () => Effect.succeed("changes"))
    .handle("removePet", ({ path }) => Effect.succeed(`removed ${path.petId}`))
    .handle("heldScoped", () => Effect.zipRight(resource, Effect.never))
    // A pre-response handler that dies, after the handler acquired a resource.
    .handle("brokenPreResponse", () =>
      Effect.as(
        Effect.zipRight(resource, HttpApp.appendPreResponseHandler(() => Effect.die(new Error("broken handler")))),
        "unreached"
      ))
    .handle("streamedScoped", () =>
      Effect.map(resource, () =>
        HttpServerResponse.stream(
          Stream.make("released ", "after ").pipe(
            Stream.concat(Stream.fromEffect(Effect.sync(() => `${events.released}`))),
            Stream.encodeText
          )
        )))
}

type Server = (request: Request) => Response | Promise<Response>

/** The engine and the library's own server, each on the registration with events of its own. */
const serversWith = (requestTimeout?: Duration.Duration) =>
  Effect.gen(function*() {
    const lines: Array<{ readonly message: unknown; readonly cause: string }> = []
    const logger = Logger.make(({ cause, message }) => {
      lines.push({ message: Array.isArray(message) ? message[0] : message, cause: Cause.pretty(cause) })
    })
    const engineEvents = makeEvents()
    const engine = yield* Effect.map(
      Layer.build(
        webHandlerFrom(
          Layer.scoped(
            RegisteredGroups,
            Effect.all([registerGroup(TestApi, "outcomes", registerOutcomes(engineEvents))])
          ),
          { corsOrigins: Option.none(), requestTimeout }
        ).pipe(Layer.provide(Sql.SqlTest))
      ),
      (context) => Context.get(context, WebHandler)
    ).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
    const libraryEvents = makeEvents()
    const library = yield* referenceServer(
      HttpApiBuilder.api(TestApi).pipe(
        Layer.provide(HttpApiBuilder.group(TestApi, "outcomes", registerOutcomes(libraryEvents)))
      )
    )
    return {
      lines,
      both: [["engine", engine, engineEvents], ["library", library, libraryEvents]] as ReadonlyArray<
        readonly [string, Server, Events]
      >
    }
  })
const servers = serversWith()

const send = (server: Server, path: string, init: RequestInit = {}) =>
  Effect.promise(async () => {
    const response = await server(new Request(`${ORIGIN}${path}`, init))
    return { status: response.status, body: await response.text(), headers: response.headers }
  })

describe("a request's own scope, on the engine as on the library's server", () => {
  it.scopedLive("what a handler acquires, adds as a finalizer or forks in its scope ends with each request", () =>
    Effect.gen(function*() {
      for (const [name, server, events] of (yield* servers).both) {
        for (let i = 1; i <= 2; i++) {
          for (const path of ["/acquired", "/finalized", "/forked-scoped"]) {
            expect((yield* send(server, path)).status, `${name} ${path}`).toBe(200)
          }
          yield* Effect.sleep("5 millis")
          const { acquired, finalized, forked, released } = events
          expect({ acquired, released, finalized }, `${name}, request ${i}`).toEqual({
            acquired: i,
            released: i,
            finalized: i
          })
          // Each forked fiber was interrupted with its request's scope.
          expect(forked.map((fiber) => Option.map(Option.fromNullable(fiber.unsafePoll()), Exit.isInterrupted)))
            .toEqual(forked.map(() => Option.some(true)))
        }
      }
    }))

  it.scopedLive("a streamed body keeps its request's scope open until the stream ends", () =>
    Effect.gen(function*() {
      for (const [name, server, events] of (yield* servers).both) {
        const response = yield* Effect.promise(async () => server(new Request(`${ORIGIN}/streamed-scoped`)))
        expect(response.status, name).toBe(200)
        // The resource is held while the body streams (its last part reads the count), released once it has ended.
        expect(yield* Effect.promise(() => response.text()), name).toBe("released after 0")
        yield* Effect.sleep("5 millis")
        expect({ acquired: events.acquired, released: events.released }, name).toEqual({ acquired: 1, released: 1 })
      }
    }))

  it.scopedLive("a streamed body its client cancels ends, and its request's scope is released", () =>
    Effect.gen(function*() {
      for (const [name, server, events] of (yield* servers).both) {
        const response = yield* Effect.promise(async () => server(new Request(`${ORIGIN}/streamed-endless`)))
        const reader = response.body!.getReader()
        expect(new TextDecoder().decode((yield* Effect.promise(() => reader.read())).value), name).toBe("first")
        yield* Effect.promise(() => Promise.race([reader.cancel(), new Promise((resolve) => setTimeout(resolve, 200))]))
        yield* Effect.sleep("20 millis")
        expect({ acquired: events.acquired, released: events.released }, name).toEqual({ acquired: 1, released: 1 })
      }
    }))

  it.scopedLive("a pre-response handler that dies is a 500, and the request's scope is released", () =>
    Effect.gen(function*() {
      const { both, lines } = yield* servers
      for (const [name, server, events] of both) {
        expect((yield* send(server, "/broken-pre-response")).status, name).toBe(500)
        yield* Effect.sleep("5 millis")
        expect({ acquired: events.acquired, released: events.released }, name).toEqual({ acquired: 1, released: 1 })
      }
      // The engine logs it as unexpected, with its cause.
      expect(lines.filter((line) => line.message === "unexpected failure").map((line) => line.cause))
        .toEqual([expect.stringContaining("broken handler")])
    }))

  it.scopedLive("a request interrupted from outside releases what it holds: its client gone, its deadline", () =>
    Effect.gen(function*() {
      for (const [name, server, events] of (yield* serversWith(Duration.millis(100))).both) {
        const controller = new AbortController()
        const pending = Promise.resolve(server(new Request(`${ORIGIN}/held-scoped`, { signal: controller.signal })))
          .catch(() => undefined)
        yield* Effect.sleep("20 millis")
        expect(events.acquired, name).toBe(1)
        controller.abort()
        yield* Effect.promise(() => pending)
        yield* Effect.sleep("5 millis")
        expect(events.released, `${name}, its client gone`).toBe(1)
        if (name === "engine") {
          // The library's server has no deadline of its own.
          expect((yield* send(server, "/held-scoped")).status).toBe(503)
          expect(events, "engine, past its deadline").toMatchObject({ acquired: 2, released: 2 })
        }
      }
    }))
})

describe("a success is what its schema encodes", () => {
  it.scopedLive("no field the schema does not name reaches a client, on the engine as on the library's server", () =>
    Effect.gen(function*() {
      for (const [name, server] of (yield* servers).both) {
        expect(yield* send(server, "/extra-field"), name).toMatchObject({
          status: 200,
          body: "{\"id\":1,\"name\":\"one\"}"
        })
        expect(yield* send(server, "/extra-fields"), name).toMatchObject({
          status: 200,
          body: "[{\"id\":1,\"name\":\"one\"}]"
        })
      }
    }))

  it.scopedLive("a value the schema refuses is never a 200: a 500 on the engine, logged with why", () =>
    Effect.gen(function*() {
      const { both, lines } = yield* servers
      const [[, engine], [, library]] = both
      expect(yield* send(engine, "/refused-value")).toMatchObject({
        status: 500,
        body: expect.stringContaining("internal_error")
      })
      const logged = lines.filter((line) => line.message === "unexpected failure")
      expect(logged).toHaveLength(1)
      expect(logged[0].cause).toContain("Expected an integer, actual 1.5")
      // The library's server answers it as a request it could not decode, a 400: a client is not at fault here.
      expect((yield* send(library, "/refused-value")).status).toBe(400)
    }))
})

describe("the outcomes the library's server has, the engine has", () => {
  it.scopedLive("a handler's own ParseError, a handler that interrupts itself, a handler that reads the body as sent", () =>
    Effect.gen(function*() {
      const [[, engine], [, library]] = (yield* servers).both
      const sent = "{ \"name\": \"Rex\" }"
      const requests: ReadonlyArray<readonly [string, RequestInit?]> = [
        ["/own-parse-error"],
        ["/self-interrupted"],
        ["/signed", { method: "POST", headers: { "content-type": "application/json" }, body: sent }]
      ]
      const statuses: Array<number> = []
      for (const [path, init] of requests) {
        const [ours, theirs] = [yield* send(engine, path, init), yield* send(library, path, init)]
        statuses.push(ours.status)
        expect(ours.status, path).toBe(theirs.status)
        // The library's 503 has no body; the engine's is its Error object.
        if (ours.status !== 503) expect(ours.body, path).toBe(theirs.body)
      }
      expect(statuses).toEqual([400, 503, 200])
      expect(JSON.parse((yield* send(engine, ...requests[2])).body)).toEqual({ name: "Rex", sent })
    }))
})

describe("a body that is not what the endpoint takes", () => {
  it.scopedLive("is refused with what that endpoint's payload is, derived from its schema", () =>
    Effect.gen(function*() {
      const [[, engine]] = (yield* servers).both
      const answer = yield* send(engine, "/signed", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "[]"
      })
      expect({ status: answer.status, body: JSON.parse(answer.body) }).toEqual({
        status: 400,
        body: { code: "invalid_body", message: "The request body must be a JSON object with a name.", status: 400 }
      })
    }))
})

describe("route precedence where a parameter path and an exact path overlap under different methods", () => {
  it.scopedLive("each method is routed as the library's router routes it", () =>
    Effect.gen(function*() {
      const [[, engine], [, library]] = (yield* servers).both
      for (const [method, path] of [["DELETE", "/pets/changes"], ["GET", "/pets/changes"], ["DELETE", "/pets/5"]]) {
        const [ours, theirs] = [yield* send(engine, path, { method }), yield* send(library, path, { method })]
        expect(ours.status, `${method} ${path}`).toBe(theirs.status)
        if (ours.status === 200) expect(ours.body).toBe(theirs.body)
      }
      expect((yield* send(engine, "/pets/changes", { method: "DELETE" })).status).toBe(400)
      // A method neither has: 405, allowing what either serves.
      const patch = yield* send(engine, "/pets/changes", { method: "PATCH" })
      expect({ status: patch.status, allow: patch.headers.get("allow") }).toEqual({
        status: 405,
        allow: "GET, HEAD, DELETE"
      })
    }))
})
