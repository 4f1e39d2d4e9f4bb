/**
 * A command that ran and failed (a key that does not exist, a server that does not answer, a backup with no space
 * left), in one line that says why. Exit code 1. Shared by the commands' modules.
 */
import { Schema } from "effect"

export class CommandFailed extends Schema.TaggedError<CommandFailed>()("CommandFailed", { message: Schema.String }) {}
