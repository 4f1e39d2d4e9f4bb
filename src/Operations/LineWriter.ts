/**
 * Log lines to a file descriptor (stdout), whole and in order, without holding the event loop and within bounded
 * memory. Under Bun, stdout on a pipe is non-blocking: a write may take part of what it is given, or none of it
 * (`EAGAIN`) while the reader is slow. So lines are queued and written in batches — the lines of one turn of the event
 * loop in one write at the end of it — the rest of a partial write is written next, and on `EAGAIN` the writer waits
 * for the pipe on a timer, backing off, while the service goes on. Past `maxBufferedChars` waiting, new lines are
 * dropped whole (never cut), counted, and a warning line says how many once there is room again. At exit, what is
 * left is written synchronously, waiting for the pipe up to `exitWaitMs`.
 */
import { writeSync } from "node:fs"

export interface LineWriterOptions {
  /** How much may wait to be written, in characters (about bytes for JSON lines); past it, lines are dropped. */
  readonly maxBufferedChars: number
  /** At exit, how long to wait for a full pipe before giving up on what is left. */
  readonly exitWaitMs: number
  /** The write itself (a test may stand in for the pipe): returns the bytes written, throws `EAGAIN` when full. */
  readonly write?: (fd: number, data: string | Uint8Array) => number
}

export interface LineWriter {
  /** Queues one line (without its newline). */
  readonly line: (text: string) => void
  /** Writes everything queued now, waiting for the pipe (at exit). */
  readonly flushSync: () => void
}

const FIRST_WAIT_MS = 1
const LONGEST_WAIT_MS = 50

/** The line that reports dropped lines, in the JSON logger's shape. */
const droppedLine = (dropped: number) =>
  `{"message":"log lines dropped: the reader of the log is too slow","logLevel":"WARN","timestamp":"${
    new Date().toISOString()
  }","annotations":{"droppedLines":${dropped}},"spans":{},"fiberId":"#0"}`

export const makeLineWriter = (fd: number, options: LineWriterOptions): LineWriter => {
  const write = options.write ??
    ((fd: number, data: string | Uint8Array) => typeof data === "string" ? writeSync(fd, data) : writeSync(fd, data))
  /** Whole lines not yet handed to the pipe, and the rest of a batch the pipe took part of. */
  let queued: Array<string> = []
  let queuedChars = 0
  let rest: string | Uint8Array | undefined
  let unreported = 0
  /** A flush is due: at the end of this turn of the event loop, or on a timer while the pipe is full. */
  let pending = false
  let waitMs = FIRST_WAIT_MS
  let broken = false

  const enqueue = (text: string) => {
    queued.push(text)
    queuedChars += text.length
  }
  const reportDropped = () => {
    if (unreported === 0) return
    enqueue(droppedLine(unreported) + "\n")
    unreported = 0
  }

  /** Writes what it can without waiting; true when everything queued is written. */
  const writeSome = (): boolean => {
    for (;;) {
      if (rest === undefined) {
        if (queued.length === 0) reportDropped()
        if (queued.length === 0) return true
        rest = queued.length === 1 ? queued[0] : queued.join("")
        queued = []
        queuedChars = 0
      }
      let written: number
      try {
        written = write(fd, rest)
      } catch (error) {
        if ((error as { code?: unknown } | null)?.code === "EAGAIN") return false
        // stdout is gone: nothing else to tell it to
        broken = true
        queued = []
        queuedChars = 0
        rest = undefined
        return true
      }
      if (written > 0) waitMs = FIRST_WAIT_MS // the reader is reading: the next wait starts short again
      // A string goes to the pipe as is (no copy); only the rest of a partial write is turned into bytes.
      const bytes = typeof rest === "string" ? Buffer.byteLength(rest) : rest.length
      rest = written >= bytes ? undefined : (typeof rest === "string" ? Buffer.from(rest) : rest).subarray(written)
    }
  }

  const flush = () => {
    pending = false
    if (writeSome()) return
    // The pipe is full: try again later, without holding the event loop meanwhile.
    pending = true
    setTimeout(flush, waitMs)
    waitMs = Math.min(waitMs * 2, LONGEST_WAIT_MS)
  }

  const line = (text: string) => {
    if (broken) return
    if (queuedChars + (rest?.length ?? 0) + text.length + 1 > options.maxBufferedChars) {
      unreported++
      return
    }
    reportDropped()
    enqueue(text + "\n")
    if (!pending) {
      pending = true
      setImmediate(flush)
    }
  }

  const flushSync = () => {
    const deadline = Date.now() + options.exitWaitMs
    while (!writeSome() && Date.now() < deadline) Bun.sleepSync(1)
  }

  return { line, flushSync }
}
