/**
 * The command line's help and its usage errors. The help is short, specific to each command, plain text (no colour
 * codes, whatever stdout is); written by hand rather than generated, because the generated help lists built-in options
 * petstore does not offer and describes every option in generic words.
 */
import { Schema } from "effect"

/** A command line that cannot be run as given: the message names the command and points to its help. Exit code 2. */
export class UsageError extends Schema.TaggedError<UsageError>()("UsageError", {
  command: Schema.String,
  problem: Schema.String
}) {
  override get message() {
    const command = ["petstore", this.command].filter((word) => word !== "").join(" ")
    return `${command}: ${this.problem}\nRun '${command} --help' for usage.`
  }
}

const DATABASE =
  "  --database URL   a SQLite file path, :memory:, or a postgres:// URL (default: $DATABASE_URL, else petstore.db)"

const HELP = {
  "": `petstore VERSION: the pet store catalogue service (HTTP and JSON, SQLite or PostgreSQL).

Usage: petstore [COMMAND] [OPTIONS]

Commands:
  serve            run the HTTP service (the default when no command is given)
  keys create      issue an API key; prints the key alone on stdout
  keys list        list API keys (never the keys themselves)
  keys revoke ID   revoke an API key
  backup FILE      write a consistent snapshot of the SQLite database to FILE, while servers keep serving
  restore FILE     put a snapshot in place of the SQLite database (servers stopped)
  openapi          print the OpenAPI document that GET /openapi.json serves
  healthcheck      check that the server answers GET /healthz (for container health checks)

Options:
  -h, --help       show help; after a command, that command's (petstore keys create --help)
  --version        print the version

Configuration comes from the environment (HOST, PORT, DATABASE_URL, LOG_LEVEL, LOG_FORMAT, ...; see docs/operations.md).
Quick start: petstore keys create --name me, then petstore serve, then open http://localhost:8080/docs.`,
  serve: `Usage: petstore serve [--host HOST] [--port PORT] [--database URL]

Runs the HTTP service until SIGTERM or SIGINT, then finishes the requests in flight and exits 0. Logs go to stdout.

Options:
  --host HOST      the address to listen on (default: $HOST, else 0.0.0.0)
  --port PORT      the port to listen on, 1 to 65535 (default: $PORT, else 8080)
${DATABASE}`,
  keys: `Usage: petstore keys create --name NAME | keys list | keys revoke ID  [--database URL]

Manages the API keys that requests send as 'Authorization: Bearer <API_KEY>'. Works beside a running server.

Commands:
  create --name NAME   issue a key for NAME; prints the key alone on stdout (shown once: only its hash is stored)
  list                 list the keys: id, name, created, last used, revoked
  revoke ID            revoke the key with this id (as 'keys list' shows it); servers refuse it within half a second`,
  "keys create": `Usage: petstore keys create --name NAME [--database URL]

Issues an API key and prints it alone on stdout (KEY=$(petstore keys create --name ci) captures it); the note about it
goes to stderr. The key is shown once: only its SHA-256 is stored.

Options:
  --name NAME      who or what the key is for, 1 to 100 characters
${DATABASE}`,
  "keys list": `Usage: petstore keys list [--database URL]

Lists the API keys: id, name, created, last used, revoked. Never the keys themselves.

Options:
${DATABASE}`,
  "keys revoke": `Usage: petstore keys revoke ID [--database URL]

Revokes the API key with this id (12 hexadecimal digits, as 'keys list' shows it). Requests with it get 401 from
then on (within half a second on servers already running).

Options:
${DATABASE}`,
  backup: `Usage: petstore backup FILE [--force] [--database URL]

Writes a consistent snapshot of the SQLite database (pets, API keys, everything) to FILE while servers keep serving
and writing to it: one committed state, written to a temporary name beside FILE, synced, then renamed into place.
Prints FILE's path alone on stdout; the size, the number of pets and the time taken go to stderr. Exit 1 with the
reason when it cannot (no space, not writable, database unreadable); exit 2 for PostgreSQL (use pg_dump).

Options:
  --force          replace FILE if it exists (without it, an existing FILE is refused)
${DATABASE}`,
  restore: `Usage: petstore restore FILE [--database URL]

Puts the snapshot FILE (as 'petstore backup' writes it) in place of the SQLite database, after checking it
(PRAGMA integrity_check). Refused while a process (a server) has the database open: stop the service first, restore,
start it. The database's old -wal and -shm files are removed. Prints the database's path alone on stdout.

Options:
${DATABASE}`,
  openapi: `Usage: petstore openapi

Prints the OpenAPI 3.1 document that GET /openapi.json serves (servers from PUBLIC_URL and STAGING_URL).`,
  healthcheck: `Usage: petstore healthcheck [--host HOST] [--port PORT]

Asks the server at HOST:PORT for GET /healthz (127.0.0.1 when HOST is 0.0.0.0); exits 0 when it answers 200, 1 otherwise.

Options:
  --host HOST      the server's address (default: $HOST, else 0.0.0.0, asked on 127.0.0.1)
  --port PORT      the server's port (default: $PORT, else 8080)`
}

/** The commands, as the help and the usage errors name them (`petstore keys create`). */
export type CommandPath = keyof typeof HELP

/** The help of a command, or of the program. */
export const helpText = (path: CommandPath, version: string): string => HELP[path].replace("VERSION", version)

/** The command a command line names: its leading words that are a command (`keys create` of `keys create --name x`). */
export const commandPathOf = (args: ReadonlyArray<string>): CommandPath =>
  [args.slice(0, 2).join(" "), args[0] ?? ""].find((path): path is CommandPath => Object.hasOwn(HELP, path)) ?? ""
