/**
 * The model of the change feed (`support/feedModel.ts`) in process: on a SQLite file with one server, and on one
 * PostgreSQL database with two (replicas). A drain here stops the server's listener (`Lifecycle.stopAccepting`), lets
 * its requests in flight finish while a new server on the same database takes the new ones, as a replica restarted
 * behind a load balancer does. A create that rolls back is a transaction of the server's own statements that inserts
 * the pet, waits, and fails. The search runs a few sequences here (`MODEL_RUNS` runs more); the compiled executable,
 * with restarts, is `test/system/FeedModel.test.ts`.
 */
import type { SqlClient } from "@effect/sql"
import { describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Option, Schema, Scope } from "effect"
import { ApiKeys, keyIdOf } from "../src/Auth/ApiKeys.js"
import { statement, Statements } from "../src/Database/Statements.js"
import { Lifecycle } from "../src/Operations/Lifecycle.js"
import { type Backend, describePostgres, SQLite } from "./support/backends.js"
import {
  type Command,
  Commands,
  type Committed,
  type FeedSystem,
  runCommands,
  runFeedModel
} from "./support/feedModel.js"
import { type App, appOn } from "./support/retries.js"

const INSERT = statement<{ readonly id: number }, [name: string, status: string]>(
  `INSERT INTO pets (name, category_id, status) VALUES (?, 1, ?) RETURNING id`,
  Schema.Struct({ id: Schema.Number })
)
const ROLLED_BACK = "rolled back on purpose"

/** A server of the run, and what it still answers (its requests in flight, counted to close it after a drain). */
interface Server {
  readonly app: App
  readonly scope: Scope.CloseableScope
  inFlight: number
}

/** Rejects when the signal aborts: an in-process answer does not watch its request's signal. */
const abortable = <A>(promise: Promise<A>, signal: AbortSignal | null | undefined) =>
  signal == null ? promise : Promise.race([
    promise,
    new Promise<never>((_, fail) => {
      if (signal.aborted) fail(signal.reason)
      signal.addEventListener("abort", () => fail(signal.reason), { once: true })
    })
  ])

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))

/** `replicas` servers in process on a fresh database of the backend. */
const inProcess =
  (backend: Backend, replicas: number) => async (): Promise<FeedSystem & { close: () => Promise<void> }> => {
    const database = await Effect.runPromise(Scope.make())
    const url = await Effect.runPromise(Scope.extend(backend.freshDatabase, database))
    const serve = async (): Promise<Server> => {
      const scope = await Effect.runPromise(Scope.make())
      const app = await Effect.runPromise(
        Scope.extend(appOn(url, { FEED_STREAMS_PER_KEY: "50", LOG_LEVEL: "error" }), scope)
      )
      return { app, scope, inFlight: 0 }
    }
    const servers: Array<Server> = []
    const generations = Array.from({ length: replicas }, () => 0)
    for (let i = 0; i < replicas; i++) servers.push(await serve())
    const keys = [servers[0].app.key]
    for (let i = 1; i < 4; i++) keys.push(await Effect.runPromise(servers[0].app.newKey(`follower ${i}`)))
    const closing: Array<Promise<void>> = []
    const closeServer = (server: Server) => Effect.runPromise(Scope.close(server.scope, Exit.void))
    const on = <A>(replica: number, f: (context: App["context"]) => Effect.Effect<A, unknown>) =>
      Effect.runPromise(f(servers[replica].app.context))
    const postgresql = backend.name === "PostgreSQL"
    return {
      replicas,
      keys,
      generation: (replica) => generations[replica],
      // A request takes a turn of the event loop, as one over the network does: in process, a poll that a draining
      // server answers at once would otherwise be sent again and again in microtasks alone, and no timer (the drain's
      // switch to the new server among them) would ever fire.
      fetch: async (replica, path, init) => {
        await sleep(0)
        const server = servers[replica]
        server.inFlight++
        return abortable(Effect.runPromise(server.app.fetch(path, init)), init?.signal).finally(() => server.inFlight--)
      },
      rolledBack: (replica, pet) =>
        on(
          replica,
          (context) =>
            Effect.flatMap(Statements, (statements) =>
              statements.transaction((tx) =>
                tx.query(INSERT, [pet.name, pet.status]).pipe(
                  Effect.zipRight(Effect.sleep("30 millis")),
                  Effect.zipRight(Effect.fail(ROLLED_BACK))
                )
              )).pipe(
                Effect.flip,
                Effect.flatMap((error) =>
                  error === ROLLED_BACK ? Effect.void : Effect.die(error)
                ),
                Effect.provide(Statements.Default),
                Effect.provide(context as Context.Context<SqlClient.SqlClient>)
              )
        ),
      revoke: (replica, key) =>
        on(replica, (context) => Context.get(context, ApiKeys).revoke(Option.getOrThrow(keyIdOf(key)))).then(() => {}),
      drain: async (replica) => {
        const old = servers[replica]
        await on(replica, (context) => Context.get(context, Lifecycle).stopAccepting)
        // Kept-alive connections reach the draining server for a moment; then the new one takes every request.
        await sleep(100)
        servers[replica] = await serve()
        generations[replica]++
        closing.push((async () => {
          for (const deadline = Date.now() + 5_000; old.inFlight > 0 && Date.now() < deadline;) await sleep(20)
          await closeServer(old)
        })())
      },
      committed: () => {
        const { sql } = servers[0].app
        const rows = postgresql
          ? sql<Committed>`SELECT id, position, name, status FROM pets ORDER BY position`
          : sql<Committed>`SELECT id, id AS position, name, status FROM pets ORDER BY id`
        return Effect.runPromise(
          Effect.map(rows, (all) => all.map((row) => ({ ...row, id: Number(row.id), position: Number(row.position) })))
        )
      },
      close: async () => {
        await Promise.all(closing)
        for (const server of servers) await closeServer(server)
        await Effect.runPromise(Scope.close(database, Exit.void))
      }
    }
  }

/** The search's fixed runs, and room for more (`MODEL_RUNS`). */
const budget = (runs: number) => 30_000 + Number(process.env.MODEL_RUNS ?? runs) * 15_000

describe("the change feed's model", () => {
  describe("SQLite", () => {
    it.live(
      "one server on a file: every follower gets every pet it asked for once, in commit order",
      () => Effect.promise(() => runFeedModel({ make: inProcess(SQLite, 1), replicas: 1, keys: 4, numRuns: 5 })),
      budget(5)
    )
  })
  describePostgres((backend) => {
    it.live(
      "two replicas on one database: every follower on either gets every pet it asked for once, in order",
      () => Effect.promise(() => runFeedModel({ make: inProcess(backend, 2), replicas: 2, keys: 4, numRuns: 4 })),
      budget(4)
    )
  })
})

/**
 * Named cases of the model (the first its search found; the others its commands in the order that breaks them), each
 * on SQLite and on two PostgreSQL replicas.
 */
const cases: Record<string, (replicas: number) => ReadonlyArray<Command>> = {
  "a stream that reconnects to its server while it drains is ended by the drain": () => [
    Commands.stream(0, undefined, "start", 0, false),
    Commands.create(0, "available"),
    Commands.drain(0),
    Commands.create(0, "sold")
  ],
  "a stream from the start of a deep feed, read as fast as it comes, gets every pet without slow_consumer": (r) => [
    Commands.burst(1_100, r - 1),
    Commands.stream(0, undefined, "start", 0, false)
  ],
  "a poll that waits when its key is revoked gets no pet created after the revocation": (r) => [
    Commands.poll(1, undefined, "now", r - 1, 7),
    Commands.revoke(1, 0),
    Commands.wait(600),
    Commands.create(0, "available")
  ],
  "a stream whose client has stopped reading is ended by the drain, what it has not read dropped": (r) => [
    Commands.stream(1, undefined, "now", r - 1, true),
    Commands.create(0, "pending"),
    Commands.pause(0, true),
    Commands.burst(30, r - 1),
    Commands.drain(r - 1)
  ],
  "a stream that stops reading once its draining server has ended it is ended by the next drain": (r) => [
    Commands.stream(2, "available", "now", r - 1, true),
    Commands.create(0, "available"),
    Commands.drain(r - 1),
    Commands.pause(0, true),
    Commands.drain(r - 1)
  ],
  "a poll that waits when its server drains polls on from the new one": (r) => [
    Commands.poll(2, "sold", "start", r - 1, 7),
    Commands.drain(r - 1)
  ]
}

describe("the change feed's model: named cases", () => {
  for (const [name, commands] of Object.entries(cases)) {
    describe("SQLite", () => {
      it.live(name, () => Effect.promise(() => runCommands(inProcess(SQLite, 1), commands(1))), 30_000)
    })
    describePostgres((backend) => {
      it.live(name, () => Effect.promise(() => runCommands(inProcess(backend, 2), commands(2))), 30_000)
    })
  }
})
