import { ValidationError } from "@effect/cli"
import { BunContext, BunRuntime } from "@effect/platform-bun"
import { Cause, Console, Effect, Option } from "effect"
import { run } from "./Cli.js"

/** A failure that stops the program: one readable line on stderr (the command line reports its own), exit 1. */
const report = (cause: Cause.Cause<unknown>) =>
  Option.match(Cause.failureOption(cause), {
    onNone: () => Cause.isInterruptedOnly(cause) ? Effect.void : Console.error(`petstore: ${Cause.pretty(cause)}`),
    onSome: (error) =>
      ValidationError.isValidationError(error)
        ? Effect.void
        : Console.error(`petstore: ${error instanceof Error && error.message !== "" ? error.message : String(error)}`)
  })

run(process.argv).pipe(
  Effect.tapErrorCause(report),
  Effect.provide(BunContext.layer),
  (program) => BunRuntime.runMain(program, { disablePrettyLogger: true, disableErrorReporting: true })
)
