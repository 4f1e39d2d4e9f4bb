/** The failure of a command that ran (the command line was fine), shared by the commands' modules. */
import { Schema } from "effect"

/**
 * A command that ran and failed (a key that does not exist, a server that does not answer, a backup with no space
 * left), in one line that says why. Exit code 1.
 */
export class CommandFailed extends Schema.TaggedError<CommandFailed>()("CommandFailed", { message: Schema.String }) {}
