/**
 * The command line: `serve` (the default), `keys create|list|revoke`, `openapi`. Flags override the environment.
 */
import { Args, Command, Options, ValidationError } from "@effect/cli"
import { FetchHttpClient, HttpClient, HttpClientResponse } from "@effect/platform"
import { BunContext } from "@effect/platform-bun"
import { Console, Effect, Layer, Redacted, Schema } from "effect"
import { openApiDocument } from "./Api.js"
import { ApiKeys } from "./Auth/ApiKeys.js"
import { Host, Port, ServersConfig } from "./Config.js"
import { ApiKeyId, KeyName } from "./Domain/ApiKey.js"
import { LoggingLive } from "./Logging.js"
import { serve as serveHandler, VERSION } from "./Serve.js"
import * as Sql from "./Sql.js"

const database = Options.redacted("database").pipe(
  Options.withDescription("SQLite file path, ':memory:', or a postgres:// URL (DATABASE_URL)"),
  Options.withFallbackConfig(Sql.DatabaseUrl)
)
const host = Options.text("host").pipe(
  Options.withDescription("listen address (HOST)"),
  Options.withFallbackConfig(Host)
)
const port = Options.integer("port").pipe(
  Options.withDescription("listen port (PORT)"),
  Options.withFallbackConfig(Port)
)

const serveOptions = { host, port, database }

const serve = Command.make("serve", serveOptions, serveHandler).pipe(
  Command.withDescription("Run the HTTP service (the default command).")
)

const withKeys = (databaseUrl: Redacted.Redacted<string>) =>
  Effect.provide(Layer.merge(ApiKeys.Default.pipe(Layer.provide(Sql.layer(databaseUrl))), LoggingLive("stderr")))

const keysCreate = Command.make(
  "create",
  { name: Options.text("name").pipe(Options.withDescription("who or what the key is for")), database },
  ({ database, name }) =>
    Effect.gen(function*() {
      const keys = yield* ApiKeys
      const keyName = yield* Schema.decodeUnknown(KeyName)(name)
      const created = yield* keys.create(keyName)
      yield* Console.error(`Created API key ${created.id} (${created.name}). It is shown once; store it now:`)
      yield* Console.log(Redacted.value(created.key))
    }).pipe(withKeys(database))
).pipe(Command.withDescription("Issue an API key; prints the key alone on the last line of stdout."))

const keysList = Command.make("list", { database }, ({ database }) =>
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    const all = yield* keys.list
    const rows = [
      ["ID", "NAME", "CREATED", "LAST USED", "REVOKED"],
      ...all.map((key) => [key.id, key.name, key.createdAt, key.lastUsedAt ?? "-", key.revokedAt ?? "-"])
    ]
    const widths = rows[0].map((_, column) => Math.max(...rows.map((row) => row[column].length)))
    for (const row of rows) yield* Console.log(row.map((cell, i) => cell.padEnd(widths[i])).join("  ").trimEnd())
  }).pipe(withKeys(database))).pipe(Command.withDescription("List API keys (never the keys themselves)."))

const keysRevoke = Command.make(
  "revoke",
  { id: Args.text({ name: "ID" }).pipe(Args.withDescription("the key id, as `keys list` shows it")), database },
  ({ database, id }) =>
    Effect.gen(function*() {
      const keys = yield* ApiKeys
      const keyId = yield* Schema.decodeUnknown(ApiKeyId)(id)
      const revoked = yield* keys.revoke(keyId)
      if (!revoked) return yield* Effect.fail(new KeyNotFound({ id }))
      yield* Console.log(`Revoked API key ${keyId}.`)
    }).pipe(withKeys(database))
).pipe(Command.withDescription("Revoke an API key: requests with it get 401 from then on."))

class KeyNotFound extends Schema.TaggedError<KeyNotFound>()("KeyNotFound", { id: Schema.String }) {
  override get message() {
    return `No API key has the id ${this.id}.`
  }
}

const keys = Command.make("keys").pipe(
  Command.withDescription("Manage API keys."),
  Command.withSubcommands([keysCreate, keysList, keysRevoke])
)

const openapi = Command.make("openapi", {}, () =>
  Effect.flatMap(ServersConfig, (servers) => Console.log(JSON.stringify(openApiDocument(servers), null, 2)))).pipe(
    Command.withDescription("Print the OpenAPI document that GET /openapi.json serves.")
  )

/** The container's HEALTHCHECK: asks the local server's /healthz, exits non-zero unless it answers 200. */
const healthcheck = Command.make("healthcheck", { port }, ({ port }) =>
  HttpClient.get(`http://127.0.0.1:${port}/healthz`).pipe(
    Effect.flatMap(HttpClientResponse.filterStatusOk),
    Effect.timeout("2 seconds"),
    Effect.zipRight(Console.log("ok")),
    Effect.provide(FetchHttpClient.layer)
  )).pipe(Command.withDescription("Check that the server on PORT answers GET /healthz (for container health checks)."))

export const cli = Command.make("petstore", serveOptions, serveHandler).pipe(
  Command.withDescription("The pet store catalogue service."),
  Command.withSubcommands([serve, keys, openapi, healthcheck])
)

export const run = Command.run(cli, { name: "petstore", version: VERSION })

/** The whole command line, given `process.argv`, with the platform services the parser needs. */
export const main = (argv: ReadonlyArray<string>) => run(argv).pipe(Effect.provide(BunContext.layer))

/** Failures the command line has already shown to the user (usage errors). */
export const reportsItself = (error: unknown): boolean => ValidationError.isValidationError(error)

