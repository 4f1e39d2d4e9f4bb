/**
 * The executable. Starting the service is what an orchestrator waits for, so `petstore` and `petstore serve` without
 * flags start it straight from the environment (the configuration the command line itself falls back to) without
 * loading the command-line parser, which costs tens of milliseconds at start-up. Every other command line goes to the
 * parser (`Cli.ts`), `serve` with flags included.
 */
import { BunRuntime } from "@effect/platform-bun"
import { Cause, Console, Effect, Option } from "effect"

const args = process.argv.slice(2)
const servesFromEnvironment = args.length === 0 || (args.length === 1 && args[0] === "serve")

/** A failure that stops the program: one readable line on stderr (unless already shown), exit 1. */
const report = (reportsItself: (error: unknown) => boolean) => (cause: Cause.Cause<unknown>) =>
  Option.match(Cause.failureOption(cause), {
    onNone: () => Cause.isInterruptedOnly(cause) ? Effect.void : Console.error(`petstore: ${Cause.pretty(cause)}`),
    onSome: (error) =>
      reportsItself(error)
        ? Effect.void
        : Console.error(`petstore: ${error instanceof Error && error.message !== "" ? error.message : String(error)}`)
  })

const program: Effect.Effect<unknown, unknown> = servesFromEnvironment
  ? Effect.flatMap(Effect.promise(() => import("./Serve.js")), (serve) =>
    serve.serveFromEnvironment.pipe(Effect.tapErrorCause(report(() => false))))
  : Effect.flatMap(Effect.promise(() => import("./Cli.js")), (cli) =>
    cli.main(process.argv).pipe(Effect.tapErrorCause(report(cli.reportsItself))))

BunRuntime.runMain(program, { disablePrettyLogger: true, disableErrorReporting: true })
