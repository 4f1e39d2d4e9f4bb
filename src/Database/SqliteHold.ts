/**
 * A unit that goes on holds its turn's transaction open (`SqliteWriter.ts`): the units queued meanwhile wait for the
 * next turn. The hold ends when the unit does, at its deadline (it is stopped, and fails), when its caller is
 * interrupted (it is stopped) or when the writer closes (the whole turn is rolled back). The rest of the turn then
 * runs at a turn of the event loop of its own, not inside the unit's last step.
 */
import { Exit } from "effect"
import { type Continuing, heldTooLong, type Outcome, type Pending } from "./SqliteUnits.js"

/** The unit the writer holds its transaction for, and how to end that hold. */
export interface Held {
  readonly pending: Pending
  /** Stops the unit; the hold ends with `outcome` (a failure: the unit is rolled back), and the turn goes on. */
  readonly stop: (outcome: Outcome) => void
  /** Stops the unit and rolls the whole turn back now: the writer closes. */
  readonly abandon: () => void
}

/**
 * Holds the transaction for `unit` (of `pending`) until it ends: then `goOn` with its outcome, once; or `abandon` (the
 * writer closes), once, and never both.
 */
export const holdFor = (
  pending: Pending,
  unit: Continuing<unknown, unknown>,
  then: { readonly goOn: (outcome: Outcome) => void; readonly abandon: () => void }
): Held => {
  /** The unit's outcome is known, or it was stopped. */
  let ended = false
  /** The hold is over: the turn goes on, or was abandoned. */
  let over = false
  const goOn = (outcome: Outcome) => {
    if (over) return
    over = true
    then.goOn(outcome)
  }
  const end = (outcome: Outcome) => {
    if (ended) return
    ended = true
    clearTimeout(timer)
    setImmediate(() => goOn(outcome))
  }
  const stop = (outcome: Outcome) => {
    if (ended) return
    unit.stop()
    end(outcome)
  }
  const abandon = () => {
    if (over) return
    over = true
    clearTimeout(timer)
    if (!ended) unit.stop()
    ended = true
    then.abandon()
  }
  const timer = setTimeout(() => stop(Exit.fail(heldTooLong())), Math.max(0, pending.deadline - Date.now()))
  unit.onEnd(end)
  return { pending, stop, abandon }
}
