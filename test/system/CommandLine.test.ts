/**
 * The executable as a newcomer meets it: help, version, usage errors, bad configuration, a database it cannot open, the
 * keys commands' output and the health check. Judged by exit code, stdout and stderr: stdout carries only the result,
 * every message names the program and says what to do.
 */
import { spawnSync } from "node:child_process"
import { chmodSync, mkdirSync, readdirSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { BINARY, createKey, runAlone, scratchDirectory, startPetstore, stopAll } from "./support/petstore.js"

afterAll(stopAll)

// eslint-disable-next-line no-control-regex -- a colour code is what is looked for
const ANSI = /\x1b\[/
const STACK_LINE = /^\s+at /m

describe("help and version", () => {
  it("--help is short, specific and plain when piped", () => {
    const help = runAlone(["--help"])
    expect(help.status).toBe(0)
    expect(help.stdout).not.toMatch(ANSI)
    expect(help.stdout.trim().split("\n").length).toBeLessThanOrEqual(25)
    for (const command of ["serve", "keys create", "keys list", "keys revoke", "openapi", "healthcheck"]) {
      expect(help.stdout).toContain(command)
    }
    for (const generic of ["--wizard", "--completions", "redacted", "user-defined", "--log-level"]) {
      expect(help.stdout).not.toContain(generic)
    }
    expect(runAlone(["-h"]).stdout).toBe(help.stdout)
    expect(runAlone(["help"]).stdout).toBe(help.stdout)
  })

  it("a command's --help is that command's", () => {
    const help = runAlone(["keys", "create", "--help"])
    expect(help.status).toBe(0)
    expect(help.stdout).toMatch(/^Usage: petstore keys create --name NAME/)
    expect(help.stdout).toContain("--database URL")
    expect(runAlone(["serve", "--help"]).stdout).toMatch(/--port PORT\s+the port to listen on, 1 to 65535/)
  })

  it("dist/ holds the executable alone: its source map is embedded in it", () => {
    expect(readdirSync(dirname(BINARY))).toEqual(["petstore"])
  })

  it("--version prints the version alone", () => {
    const version = runAlone(["--version"])
    expect(version.status).toBe(0)
    expect(version.stdout).toBe("1.0.0\n")
  })
})

describe("usage errors: exit 2, the command named, its help pointed to", () => {
  const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
    [["serve", "--port", "abc"], `petstore serve: --port must be an integer from 1 to 65535 (got "abc").`],
    [["keys", "create", "--name", ""], `petstore keys create: --name: a key name is 1 to 100 characters (got "").`],
    [
      ["keys", "create"],
      "petstore keys create: --name is required: the key's name, 1 to 100 characters, says who or what uses it " +
      "(--name ci-deploy)."
    ],
    [["keys", "revoke", "nope"], `petstore keys revoke: ID: a key id is 12 hexadecimal digits (got "nope").`],
    [["keys"], "petstore keys: a command is needed: create, list or revoke."],
    [["serve", "--bogus"], "petstore serve: '--bogus' is not an option of this command, or its value is missing."],
    [
      ["keys", "list", "--database"],
      "petstore keys list: '--database' is not an option of this command, or its value is missing."
    ],
    [["openapi", "extra"], "petstore openapi: unexpected argument 'extra'."]
  ]
  for (const [args, message] of cases) {
    it(`petstore ${args.join(" ")}`, () => {
      const result = runAlone(args)
      expect(result.status).toBe(2)
      expect(result.stdout).toBe("")
      const command = message.slice(0, message.indexOf(":"))
      expect(result.stderr).toBe(`${message}\nRun '${command} --help' for usage.\n`)
    })
  }
})

describe("configuration errors: exit 1, the variable, the value and the accepted forms", () => {
  const cases: ReadonlyArray<readonly [Record<string, string>, string]> = [
    [{ PORT: "99999" }, `petstore: PORT must be an integer from 1 to 65535 (got "99999")`],
    [{ PORT: "abc" }, `petstore: PORT must be an integer from 1 to 65535 (got "abc")`],
    [
      { SHUTDOWN_TIMEOUT: "soon" },
      `petstore: SHUTDOWN_TIMEOUT must be a duration such as 2s, 500ms, 2 seconds, 1 minute, or 0 (got "soon")`
    ],
    [
      { DATABASE_URL: "postgres://u:p@127.0.0.1:1/db", DB_STARTUP_TIMEOUT: "2 parsecs" },
      `petstore: DB_STARTUP_TIMEOUT must be a duration such as 2s, 500ms, 2 seconds, 1 minute, or 0 (got "2 parsecs")`
    ]
  ]
  for (const [env, message] of cases) {
    it(Object.entries(env).map(([name, value]) => `${name}=${value}`).join(" "), () => {
      const result = runAlone([], { HOST: "127.0.0.1", ...env })
      expect(result.status).toBe(1)
      expect(result.stdout).toBe("")
      expect(result.stderr).toBe(`${message}\n`)
    })
  }

  it("a command reads only the settings it uses: PORT=99999 petstore keys list lists the keys", () => {
    const result = runAlone(["keys", "list", "--database", join(scratchDirectory(), "pets.db")], { PORT: "99999" })
    expect(result.status).toBe(0)
    expect(result.stderr).toBe("")
    expect(result.stdout).toMatch(/^ID\s+NAME\s+CREATED/)
  })

  it("durations take 2s, 500ms, 2 seconds and 0", async () => {
    for (const timeout of ["2s", "500ms", "2 seconds", "0"]) {
      const server = await startPetstore({
        database: join(scratchDirectory(), "pets.db"),
        env: { SHUTDOWN_TIMEOUT: timeout }
      })
      expect((await server.kill("SIGTERM")).code).toBe(0)
    }
  })

  it("PostgreSQL that never answers: retry warnings, then the final message, and nothing after it", () => {
    const result = runAlone([], { DATABASE_URL: "postgres://u:secret@127.0.0.1:1/db", DB_STARTUP_TIMEOUT: "2s" })
    expect(result.status).toBe(1)
    const lines = (result.stdout + result.stderr).trim().split("\n")
    expect(lines.at(-1)).toMatch(
      /^petstore: PostgreSQL at 127\.0\.0\.1:1\/db could not be reached within 2s \(DB_STARTUP_TIMEOUT\)/
    )
    // What to check, as the other refusals say what to fix.
    expect(lines.at(-1)).toMatch(
      /\. Check that the server is running and takes connections at 127\.0\.0\.1:1, the host and port of DATABASE_URL/
    )
    expect(lines.slice(0, -1).every((line) => JSON.parse(line).message.includes("retrying"))).toBe(true)
    expect(result.stderr).not.toContain("secret")
  })
})

describe("a SQLite database that cannot be opened: one line, exit 1", () => {
  const expectExplained = (result: ReturnType<typeof runAlone>, ...parts: ReadonlyArray<string | RegExp>) => {
    expect(result.status).toBe(1)
    expect(result.stdout).toBe("")
    expect(result.stderr).not.toMatch(STACK_LINE)
    expect(result.stderr.trim().split("\n")).toHaveLength(1)
    expect(result.stderr).toMatch(/^petstore: DATABASE_URL names the SQLite database /)
    for (const part of parts) expect(result.stderr).toMatch(part)
  }

  for (const command of [[], ["keys", "list"]]) {
    it(`petstore ${command.join(" ")}: a directory that does not exist`, () => {
      expectExplained(
        runAlone(command, { DATABASE_URL: "/nonexistent/dir/pets.db", HOST: "127.0.0.1" }),
        "/nonexistent/dir/pets.db",
        "the directory /nonexistent/dir does not exist. Create it"
      )
    })
  }

  it("a directory", () => {
    const directory = scratchDirectory()
    expectExplained(
      runAlone(["keys", "list"], { DATABASE_URL: directory }),
      `${directory}, which cannot`,
      "it is a directory"
    )
  })

  // The process's user must not be root for permissions to matter: as root, the tests run these as `nobody`.
  const isRoot = process.getuid?.() === 0
  const unprivileged = isRoot ? { as: 65534 } : {}
  const user = isRoot ? /the user nobody \(uid 65534\)/ : /the user \S+ \(uid \d+\)/

  /** A directory the unprivileged user can reach. */
  const reachable = () => {
    const directory = scratchDirectory()
    chmodSync(directory, 0o755)
    return directory
  }

  it("a read-only file: which user cannot write it, and who owns it", () => {
    const directory = reachable()
    const file = join(directory, "pets.db")
    writeFileSync(file, "")
    chmodSync(file, 0o444)
    expectExplained(
      runAlone(["keys", "list"], { DATABASE_URL: file }, { ...unprivileged, cwd: directory }),
      user,
      "cannot write it",
      "mode 0444"
    )
  })

  it("a directory owned by another user", () => {
    const directory = reachable()
    const volume = join(directory, "volume")
    mkdirSync(volume)
    chmodSync(volume, 0o755)
    if (!isRoot) chmodSync(volume, 0o555)
    expectExplained(
      runAlone(["serve"], { DATABASE_URL: join(volume, "pets.db"), HOST: "127.0.0.1" }, {
        ...unprivileged,
        cwd: directory
      }),
      user,
      `cannot write the directory ${volume}`,
      /Run petstore as its owner, or give .* write access/
    )
  })

  it("a file: URI opens the file it names, once", async () => {
    const directory = scratchDirectory()
    const file = join(directory, "pets.db")
    const { key } = createKey(`file:${file}`)
    const server = await startPetstore({ database: `file://${file}?mode=rwc` })
    const response = await fetch(`${server.origin}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
    expect(response.status).toBe(200)
    expect(readdirSync(directory).filter((name) => !name.startsWith("pets.db"))).toEqual([])
    await server.kill("SIGTERM")
    const refused = runAlone(["keys", "list"], { DATABASE_URL: `file:${file}?cache=shared` })
    expect(refused.status).toBe(1)
    expect(refused.stderr).toContain("the parameter 'cache' is not supported")
  })
})

describe("the keys commands: the result on stdout, the rest on stderr", () => {
  it("keys create prints only the key on stdout; its logs go to stderr in the configured format", () => {
    const database = join(scratchDirectory(), "pets.db")
    const created = runAlone(["keys", "create", "--name", "ci"], {
      DATABASE_URL: database,
      LOG_LEVEL: "debug",
      LOG_FORMAT: "json"
    })
    expect(created.status).toBe(0)
    expect(created.stdout).toMatch(/^psk_[0-9a-f]{12}_[A-Za-z0-9_-]{43}\n$/)
    const [note, ...logs] = created.stderr.trim().split("\n").reverse()
    expect(note).toMatch(
      /^Created API key [0-9a-f]{12} \(ci\)\. The key was written to stdout and is shown only once: store it now\.$/
    )
    expect(logs.length).toBeGreaterThan(0)
    for (const line of logs) expect(JSON.parse(line).logLevel).toBeDefined()
  })

  it("the note is not coloured on a terminal", () => {
    const database = join(scratchDirectory(), "pets.db")
    const terminal = spawnSync("script", ["-qec", `${BINARY} keys create --name tty`, "/dev/null"], {
      env: { PATH: process.env.PATH ?? "", DATABASE_URL: database, TERM: "xterm-256color" },
      encoding: "utf8",
      timeout: 30_000
    })
    expect(terminal.status).toBe(0)
    expect(terminal.stdout).toMatch(/Created API key [0-9a-f]{12} \(tty\)\. It is shown once; store it now:\r?\npsk_/)
    expect(terminal.stdout).not.toMatch(ANSI)
  })

  it("revoking a revoked key says when it was revoked, not that it was revoked again", () => {
    const database = join(scratchDirectory(), "pets.db")
    const { id } = createKey(database)
    const first = runAlone(["keys", "revoke", id], { DATABASE_URL: database })
    expect(first.status).toBe(0)
    expect(first.stdout).toBe(`Revoked API key ${id} (system).\n`)
    const again = runAlone(["keys", "revoke", id], { DATABASE_URL: database })
    expect(again.status).toBe(0)
    expect(again.stdout).toMatch(new RegExp(`^API key ${id} was already revoked at \\d{4}-\\d\\d-\\d\\dT`))
    const unknown = runAlone(["keys", "revoke", "0123456789ab"], { DATABASE_URL: database })
    expect(unknown.status).toBe(1)
    expect(unknown.stderr).toBe("petstore: No API key has the id 0123456789ab; 'petstore keys list' shows the ids.\n")
  })
})

describe("healthcheck", () => {
  it("asks the server at HOST and PORT (loopback for 0.0.0.0)", async () => {
    const server = await startPetstore({ database: join(scratchDirectory(), "pets.db") })
    for (const host of ["127.0.0.1", "0.0.0.0"]) {
      const check = runAlone(["healthcheck"], { HOST: host, PORT: String(server.port) })
      expect(check.status).toBe(0)
      expect(check.stdout).toBe("ok\n")
    }
    await server.kill("SIGTERM")
  })

  it("without a server, names the address and says what to check", () => {
    const result = runAlone(["healthcheck"], { HOST: "127.0.0.1", PORT: "1" })
    expect(result.status).toBe(1)
    expect(result.stderr).toMatch(
      /^petstore: no server answers at http:\/\/127\.0\.0\.1:1\/healthz \(connection refused\)\./
    )
    expect(result.stderr).toContain("Set HOST and PORT")
  })
})
