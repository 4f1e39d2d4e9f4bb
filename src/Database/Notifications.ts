/**
 * Wake-ups from the other processes on the same database: PostgreSQL's `LISTEN`, each notification delivered once the
 * transaction that sent it has committed. A wake-up carries no data and may be missed (a connection lost and made
 * again): who listens reads the database itself, and looks again on a timer. A SQLite file has one process serving it,
 * so nothing provides this service there.
 */
import type { SqlError } from "@effect/sql"
import { Context, type Stream } from "effect"

/** The channel a create notifies on (migration 0008's trigger): the change feed's wake-up. */
export const FEED_CHANNEL = "petstore_feed"

export class Notifications extends Context.Tag("Database/Notifications")<Notifications, {
  /** A wake-up per notification on `channel` from now on. */
  readonly listen: (channel: string) => Stream.Stream<void, SqlError.SqlError>
}>() {}
