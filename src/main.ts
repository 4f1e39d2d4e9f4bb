/**
 * The executable. Starting the service is what an orchestrator waits for, so `petstore` and `petstore serve` without
 * flags start it straight from the environment (the configuration the command line itself falls back to) without
 * loading the command-line parser, which costs tens of milliseconds at start-up. Every other command line goes to the
 * parser (`Cli.ts`), `serve` with flags included.
 */
import { BunRuntime } from "@effect/platform-bun"
import { Cause, ConfigError, Effect, Exit, Option } from "effect"
import { describeConfigError } from "./Config.js"

const args = process.argv.slice(2)
const servesFromEnvironment = args.length === 0 || (args.length === 1 && args[0] === "serve")

/** A command line the parser refused (`Help.UsageError`): its message names the command already. */
const isUsageError = (error: unknown): error is Error => (error as { _tag?: unknown })?._tag === "UsageError"

/** A command that cannot be run as given: a usage error, or `backup`/`restore` asked of PostgreSQL. Exit code 2. */
const cannotRunAsGiven = (error: unknown): boolean =>
  isUsageError(error) || (error as { _tag?: unknown })?._tag === "NotForPostgres"

/** The lines that tell a person why the program stopped, each naming the program. */
const describe = (error: unknown): string => {
  if (isUsageError(error)) return error.message
  const text = ConfigError.isConfigError(error)
    ? describeConfigError(error)
    : error instanceof Error && error.message !== ""
    ? error.message
    : String(error)
  return text.split("\n").map((line) => `petstore: ${line}`).join("\n")
}

/** A failure that stops the program: readable lines on stderr, plain (Bun colours `console.error` on a terminal). */
const report = (cause: Cause.Cause<unknown>) =>
  Effect.sync(() => {
    const text = Option.match(Cause.failureOption(cause), {
      onNone: () => Cause.isInterruptedOnly(cause) ? undefined : `petstore: ${Cause.pretty(cause)}`,
      onSome: describe
    })
    if (text !== undefined) process.stderr.write(`${text}\n`)
  })

/** 2 for a command that cannot be run as given, 1 for any other failure, 0 otherwise. */
const exitCode = (exit: Exit.Exit<unknown, unknown>): number => {
  if (Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause)) return 0
  return Option.match(Cause.failureOption(exit.cause), {
    onNone: () => 1,
    onSome: (error) => cannotRunAsGiven(error) ? 2 : 1
  })
}

/** Two deliveries of a signal closer than this are one: the same Ctrl-C, reaching the service twice. */
const DUPLICATE_MS = 250

/**
 * A second SIGINT or SIGTERM stops the process at once, by that signal, skipping the drain (the runtime interrupts the
 * program on the first and then stops listening). Under `npm start` on a terminal, one Ctrl-C reaches the service twice
 * (from the terminal, and from npm, which passes its own copy on a few milliseconds later): a signal within
 * `DUPLICATE_MS` of the first is taken for that copy.
 */
const stopAtOnceOnSecondSignal = () => {
  let first: number | undefined
  const onSignal = (signal: NodeJS.Signals) => {
    const now = performance.now()
    if (first === undefined) first = now
    else if (now - first >= DUPLICATE_MS) {
      process.removeListener("SIGINT", onSignal)
      process.removeListener("SIGTERM", onSignal)
      process.kill(process.pid, signal)
    }
  }
  process.on("SIGINT", onSignal)
  process.on("SIGTERM", onSignal)
}
stopAtOnceOnSecondSignal()

const program: Effect.Effect<unknown, unknown> = servesFromEnvironment
  ? Effect.flatMap(Effect.promise(() => import("./Serve.js")), (serve) => serve.serveFromEnvironment)
  : Effect.flatMap(Effect.promise(() => import("./Cli.js")), (cli) => cli.main(process.argv))

BunRuntime.runMain(program.pipe(Effect.tapErrorCause(report)), {
  disablePrettyLogger: true,
  disableErrorReporting: true,
  teardown: (exit, onExit) => onExit(exitCode(exit))
})
