/**
 * The executable. `petstore` and `petstore serve` without flags start the service straight from the environment,
 * without loading the command-line parser (it costs tens of milliseconds of the start an orchestrator waits for).
 * Every other command line goes to the parser (`Cli.ts`), `serve` with flags included.
 */
import { BunRuntime } from "@effect/platform-bun"
import { Cause, ConfigError, Effect, Exit, Option } from "effect"
import { describeConfigError } from "./Config.js"

const args = process.argv.slice(2)
const servesFromEnvironment = args.length === 0 || (args.length === 1 && args[0] === "serve")

/** Tags read without importing their modules (`Help.ts`, the database's), which a start does not load. */
const tagOf = (error: unknown) => (error as { _tag?: unknown } | null)?._tag

/** The lines that tell a person why the program stopped, each naming the program (a usage error names its command). */
const describe = (error: unknown): string => {
  if (tagOf(error) === "UsageError") return (error as Error).message
  const text = ConfigError.isConfigError(error)
    ? describeConfigError(error)
    : error instanceof Error && error.message !== ""
    ? error.message
    : String(error)
  return text.split("\n").map((line) => `petstore: ${line}`).join("\n")
}

/**
 * How the program ends: 0 when it succeeded or was interrupted (SIGTERM/SIGINT); else the reason on stderr, plain (Bun
 * colours `console.error` on a terminal), and 2 for a command that cannot be run as given (a usage error, `backup` of
 * PostgreSQL), 1 for another failure.
 */
const teardown = (exit: Exit.Exit<unknown, unknown>, onExit: (code: number) => void) => {
  if (Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause)) return onExit(0)
  const failure = Cause.failureOption(exit.cause)
  const text = Option.match(failure, { onNone: () => `petstore: ${Cause.pretty(exit.cause)}`, onSome: describe })
  process.stderr.write(`${text}\n`)
  onExit(Option.exists(failure, (error) => tagOf(error) === "UsageError" || tagOf(error) === "NotForPostgres") ? 2 : 1)
}

/**
 * A second SIGINT or SIGTERM stops the process at once, by that signal, skipping the drain (the runtime interrupts the
 * program on the first and then stops listening). Under `npm start` on a terminal, one Ctrl-C reaches the service twice
 * (from the terminal, and from npm a few milliseconds later): a signal within 250 ms of the first is that copy.
 */
let firstSignalAt: number | undefined
const onSignal = (signal: NodeJS.Signals) => {
  const now = performance.now()
  if (firstSignalAt === undefined) firstSignalAt = now
  else if (now - firstSignalAt >= 250) {
    process.removeListener("SIGINT", onSignal)
    process.removeListener("SIGTERM", onSignal)
    process.kill(process.pid, signal)
  }
}
process.on("SIGINT", onSignal)
process.on("SIGTERM", onSignal)

const program: Effect.Effect<unknown, unknown> = servesFromEnvironment
  ? Effect.flatMap(Effect.promise(() => import("./Serve.js")), (serve) => serve.serveFromEnvironment)
  : Effect.flatMap(Effect.promise(() => import("./Cli.js")), (cli) => cli.main(process.argv))

BunRuntime.runMain(program, { disablePrettyLogger: true, disableErrorReporting: true, teardown })
