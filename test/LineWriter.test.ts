/**
 * The log's line writer against a stand-in for a slow pipe: partial writes are finished and `EAGAIN` waited for,
 * lines come out whole and in order; past the bound, whole lines are dropped and a warning line counts them.
 */
import { describe, expect, it } from "@effect/vitest"
import { makeLineWriter } from "../src/Operations/LineWriter.js"

/** A pipe that takes at most `chunk` bytes a write, refuses every other write with EAGAIN, and can be shut. */
const slowPipe = (chunk: number) => {
  const received: Array<Uint8Array> = []
  let calls = 0
  let open = true
  const again = () => Object.assign(new Error("EAGAIN: resource temporarily unavailable"), { code: "EAGAIN" })
  return {
    write: (_fd: number, data: string | Uint8Array) => {
      calls++
      if (!open || calls % 2 === 0) throw again()
      const taken = (typeof data === "string" ? Buffer.from(data) : data).subarray(0, chunk)
      received.push(Uint8Array.from(taken))
      return taken.length
    },
    text: () => Buffer.concat(received).toString("utf8"),
    shut: () => (open = false),
    reopen: () => (open = true)
  }
}

const drained = async (done: () => boolean) => {
  for (let i = 0; i < 500 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 5))
}

const lineOf = (i: number) => JSON.stringify({ message: "request", n: i, text: "é".repeat(i % 5) })

describe("LineWriter", () => {
  it("finishes partial writes and waits out EAGAIN: every line whole, in order", async () => {
    const pipe = slowPipe(61)
    const writer = makeLineWriter(1, { maxBufferedChars: 1 << 20, exitWaitMs: 1000, write: pipe.write })
    const lines = Array.from({ length: 200 }, (_, i) => lineOf(i))
    for (const line of lines) writer.line(line)
    const expected = lines.join("\n") + "\n"
    await drained(() => pipe.text() === expected)
    expect(pipe.text()).toBe(expected)
  })

  it("past the bound drops whole lines and reports how many in a warning line once there is room", async () => {
    const pipe = slowPipe(1 << 20)
    pipe.shut()
    const writer = makeLineWriter(1, { maxBufferedChars: 2000, exitWaitMs: 1000, write: pipe.write })
    const lines = Array.from({ length: 100 }, (_, i) => `line ${String(i).padStart(3, "0")} ${"x".repeat(40)}`)
    for (const line of lines.slice(0, 90)) writer.line(line)
    pipe.reopen()
    await drained(() => pipe.text().includes("droppedLines"))
    for (const line of lines.slice(90)) writer.line(line)
    await drained(() => pipe.text().endsWith(`${lines[99]}\n`))
    const out = pipe.text().split("\n").slice(0, -1)
    // The lines kept come first, whole and in order; then one warning line counts the others; then the later lines.
    const kept = out.findIndex((line) => !line.startsWith("line "))
    expect(kept).toBeGreaterThan(0)
    expect(kept).toBeLessThan(90)
    expect(out.slice(0, kept)).toEqual(lines.slice(0, kept))
    expect(JSON.parse(out[kept])).toMatchObject({
      message: "log lines dropped: the reader of the log is too slow",
      logLevel: "WARN",
      annotations: { droppedLines: 90 - kept }
    })
    expect(out.slice(kept + 1)).toEqual(lines.slice(90))
  })

  it("flushSync writes what is queued before the process exits", () => {
    const pipe = slowPipe(5)
    const writer = makeLineWriter(1, { maxBufferedChars: 1 << 20, exitWaitMs: 1000, write: pipe.write })
    writer.line("last words")
    writer.line("really")
    writer.flushSync()
    expect(pipe.text()).toBe("last words\nreally\n")
  })
})
