/**
 * The command line: `serve` (the default), `keys create|list|revoke`, `backup`, `restore`, `openapi`, `healthcheck`.
 * Flags override the environment. stdout carries only a command's result; notes, logs (in the configured format) and
 * errors go to stderr (`serve` alone logs to stdout, see `Serve.ts`).
 */
import { Args, CliConfig, Command, CommandDescriptor, HelpDoc, Options, ValidationError } from "@effect/cli"
import { BunContext } from "@effect/platform-bun"
import { Console, Effect, Either, Layer, Option, ParseResult, Redacted, Schema } from "effect"
import { openApiDocument } from "./Api.js"
import { ApiKeys } from "./Auth/ApiKeys.js"
import { CommandFailed } from "./CommandFailed.js"
import { flagOr, Host, parsePort, Port, ServersConfig } from "./Config.js"
import { backup as backupDatabase } from "./Database/Backup.js"
import { formatMillis, formatSize } from "./Database/DurableFile.js"
import { restore as restoreDatabase } from "./Database/Restore.js"
import * as Sql from "./Database/Sql.js"
import { ApiKeyId, KeyName } from "./Domain/ApiKey.js"
import { commandPathOf, helpText, UsageError } from "./Help.js"
import { askHealth } from "./Operations/Healthcheck.js"
import { LoggingLive } from "./Operations/Logging.js"
import { serve, VERSION } from "./Serve.js"

/** A line on stderr, without the colour Bun's console gives `console.error` on a terminal. */
const note = (line: string) => Effect.sync(() => void process.stderr.write(`${line}\n`))

/** What the parser reports for a flag or argument `text` that breaks its rule (`--port must be …`, `ID: …`). */
const invalid = (rule: string, text: string) => HelpDoc.p(`${rule} (got ${JSON.stringify(text)}).`)

/** An argument decoded by `schema`; a refusal is the schema's own rule (`ID: a key id is 12 hexadecimal digits`). */
const decodedBy = <A>(schema: Schema.Schema<A, string>, what: string) => (text: string) =>
  Effect.mapError(Schema.decode(schema)(text), (error) => {
    const rule = ParseResult.ArrayFormatter.formatErrorSync(error)[0]?.message ?? error.message
    return invalid(`${what}: ${rule}`, text)
  })

/**
 * The flags that override a setting. The setting itself is read from the environment only when the command runs and
 * only by the commands that use it (`flagOr`), so a bad `PORT` does not stop `keys list`, and a bad setting is a
 * failure naming its variable (exit 1), not a command line to correct.
 */
const database = Options.redacted("database").pipe(Options.optional)
const host = Options.text("host").pipe(Options.optional)
const port = Options.text("port").pipe(
  Options.mapEffect((text) =>
    Either.mapLeft(parsePort(text), (must) => ValidationError.invalidValue(invalid(`--port ${must}`, text)))
  ),
  Options.optional
)

/** `--name`, required: its absence is answered here, as its rule is, not in the parser's words. */
const keyName = Options.text("name").pipe(
  Options.optional,
  Options.mapEffect(Option.match({
    onNone: () =>
      Effect.fail(ValidationError.missingValue(HelpDoc.p(
        "--name is required: the key's name, 1 to 100 characters, says who or what uses it (--name ci-deploy)."
      ))),
    onSome: (text) => Effect.mapError(decodedBy(KeyName, "--name")(text), ValidationError.invalidValue)
  }))
)

const databaseOf = (flag: Option.Option<Redacted.Redacted<string>>) => flagOr(flag, Sql.DatabaseUrl)

const serveOptions = { host, port, database }

/**
 * The keys service on the database (`--database`, else `DATABASE_URL`), built with the logger on stderr in place;
 * `reading`: for a command that only reads, which needs only read access to a SQLite file.
 */
const withKeys = (flag: Option.Option<Redacted.Redacted<string>>, reading = false) =>
<A, E>(
  effect: Effect.Effect<A, E, ApiKeys>
) =>
  databaseOf(flag).pipe(
    Effect.flatMap((url) =>
      Effect.provide(effect, ApiKeys.Default.pipe(Layer.provide((reading ? Sql.readingLayer : Sql.layer)(url))))
    ),
    Effect.provide(LoggingLive("stderr"))
  )

const keysCreate = Command.make(
  "create",
  { name: keyName, database },
  ({ database, name }) =>
    Effect.gen(function*() {
      const created = yield* (yield* ApiKeys).create(name)
      // On a terminal the key follows this note; captured (`KEY=$(…)`, a pipe, a file), it went there instead.
      const where = process.stdout.isTTY
        ? "It is shown once; store it now:"
        : "The key was written to stdout and is shown only once: store it now."
      yield* note(`Created API key ${created.id} (${created.name}). ${where}`)
      yield* Console.log(Redacted.value(created.key))
    }).pipe(withKeys(database))
)

const keysList = Command.make("list", { database }, ({ database }) =>
  Effect.gen(function*() {
    const keys = yield* (yield* ApiKeys).list
    const rows = [
      ["ID", "NAME", "CREATED", "LAST USED", "REVOKED"],
      ...keys.map((key) => [key.id, key.name, key.createdAt, key.lastUsedAt ?? "-", key.revokedAt ?? "-"])
    ]
    const widths = rows[0].map((_, column) => Math.max(...rows.map((row) => row[column].length)))
    for (const row of rows) yield* Console.log(row.map((cell, i) => cell.padEnd(widths[i])).join("  ").trimEnd())
  }).pipe(withKeys(database, true)))

const keysRevoke = Command.make(
  "revoke",
  { id: Args.text({ name: "ID" }).pipe(Args.mapEffect(decodedBy(ApiKeyId, "ID"))), database },
  ({ database, id }) =>
    Effect.gen(function*() {
      const keys = yield* ApiKeys
      const existing = (yield* keys.list).find((key) => key.id === id)
      if (existing === undefined) {
        return yield* new CommandFailed({ message: `No API key has the id ${id}; 'petstore keys list' shows the ids.` })
      }
      if (existing.revokedAt !== null) {
        return yield* Console.log(`API key ${id} was already revoked at ${existing.revokedAt}.`)
      }
      yield* keys.revoke(id)
      yield* Console.log(`Revoked API key ${id} (${existing.name}).`)
    }).pipe(withKeys(database))
)

/**
 * A consistent snapshot of the SQLite database while servers keep serving: its path alone on stdout. A signal does not
 * cut it short (SQLite's copy cannot be stopped midway): it finishes, and its exit code says how it went.
 */
const backup = Command.make(
  "backup",
  { file: Args.text({ name: "FILE" }), force: Options.boolean("force"), database },
  (options) =>
    Effect.gen(function*() {
      const written = yield* backupDatabase({ ...options, database: yield* databaseOf(options.database) })
      yield* Console.log(written.path)
      const size = formatSize(written.bytes)
      yield* note(`Backed up ${written.database}: ${written.pets} pets, ${size}, in ${formatMillis(written.millis)}.`)
    }).pipe(Effect.uninterruptible)
)

/**
 * A snapshot put in place of the SQLite database, servers stopped: the database's path alone on stdout. Not cut short
 * by a signal, which could leave the old database without its WAL and the new one not yet in place.
 */
const restore = Command.make(
  "restore",
  { file: Args.text({ name: "FILE" }), database },
  (options) =>
    Effect.gen(function*() {
      const restored = yield* restoreDatabase({ ...options, database: yield* databaseOf(options.database) })
      yield* Console.log(restored.path)
      yield* note(`Restored ${restored.path} from ${restored.snapshot}: ${restored.pets} pets. Start the service now.`)
    }).pipe(Effect.uninterruptible)
)

const openapi = Command.make(
  "openapi",
  {},
  () => Effect.flatMap(ServersConfig, (servers) => Console.log(JSON.stringify(openApiDocument(servers), null, 2)))
)

/** The container's HEALTHCHECK: asks the server's /healthz, exits non-zero unless it answers 200. */
const healthcheck = Command.make("healthcheck", { host, port }, (flags) =>
  Effect.gen(function*() {
    return yield* askHealth(yield* flagOr(flags.host, Host), yield* flagOr(flags.port, Port))
  }).pipe(Effect.provide(LoggingLive("stderr"))))

const cli = Command.make("petstore", serveOptions, serve).pipe(
  Command.withSubcommands([
    Command.make("serve", serveOptions, serve),
    Command.make("keys").pipe(Command.withSubcommands([keysCreate, keysList, keysRevoke])),
    backup,
    restore,
    openapi,
    healthcheck
  ])
)

/** The text of a parser's complaint, without the colour codes it is rendered with. */
// eslint-disable-next-line no-control-regex -- the escape sequences are exactly what is removed
const plain = (doc: HelpDoc.HelpDoc) => HelpDoc.toAnsiText(doc).replace(/\x1b\[[0-9;]*m/g, "").trim()

/**
 * The whole command line, given the arguments after the program's name. Help and the version are answered here, the
 * rest is parsed by @effect/cli; a command line it refuses fails with a `UsageError` (shown by `main.ts`).
 */
const runArgs = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const command = commandPathOf(args[0] === "help" ? args.slice(1) : args)
    if (args[0] === "help" || args.includes("-h") || args.includes("--help")) {
      return yield* Console.log(helpText(command, VERSION))
    }
    if (args.length === 1 && args[0] === "--version") return yield* Console.log(VERSION)
    const directive = yield* CommandDescriptor.parse(cli.descriptor, ["petstore", ...args], CliConfig.defaultConfig)
      .pipe(
        Effect.mapError((error) => new UsageError({ command, problem: plain(error.error) }))
      )
    if (directive._tag === "BuiltIn") {
      return yield* new UsageError({ command, problem: `unknown option (see the options below --help).` })
    }
    const [first] = directive.leftover
    if (first !== undefined) {
      // A flag left over is an unknown one, or a known one without its value (`--database` at the end).
      const problem = first.startsWith("-")
        ? `'${first}' is not an option of this command, or its value is missing.`
        : `unexpected argument '${first}'.`
      return yield* new UsageError({ command, problem })
    }
    return yield* cli.transform(cli.handler(directive.value), directive.value).pipe(
      // `keys` alone: the parser asks for its help, which is a usage error here.
      Effect.catchIf(
        (error: unknown) => ValidationError.isValidationError(error) && ValidationError.isHelpRequested(error),
        () => new UsageError({ command, problem: "a command is needed: create, list or revoke." })
      )
    )
  })

/** The whole command line, given `process.argv`, with the platform services the parser needs. */
export const main = (argv: ReadonlyArray<string>) => runArgs(argv.slice(2)).pipe(Effect.provide(BunContext.layer))
