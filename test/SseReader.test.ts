/**
 * The system tests' event-stream reader (test/system/support/sse.ts) reads the format as the HTML standard defines it:
 * blocks end at a blank line whatever the line ending, also split across chunks; one space after the colon is dropped;
 * comments, id-only blocks and the retry hint come through; the last event id is set only by a completed block.
 */
import { describe, expect, it } from "@effect/vitest"
import { SseParser } from "./system/support/sse.js"

describe("the system tests' event-stream reader", () => {
  it("reads the feed's blocks: the retry hint, an event, an id-only block, a heartbeat", () => {
    const parser = new SseParser()
    const blocks = parser.push(
      "retry: 1000\n\nid: 4f2a9c01d3b7e865.1\nevent: created\ndata: {\"id\":1}\n\nid: 4f2a9c01d3b7e865.2\n\n: heartbeat\n\n"
    )
    expect(blocks).toEqual([
      { retry: 1000, comments: [] },
      { id: "4f2a9c01d3b7e865.1", event: "created", data: "{\"id\":1}", comments: [] },
      { id: "4f2a9c01d3b7e865.2", comments: [] },
      { comments: ["heartbeat"] }
    ])
    expect(parser.lastEventId).toBe("4f2a9c01d3b7e865.2")
  })

  it("takes CRLF, CR and LF, split anywhere, a leading BOM, several data lines, a field without a colon", () => {
    const text = "\uFEFFid:a\r\ndata: one\rdata:  two\ndata\r\n\r\nevent: x\r\n\r\n"
    for (let cut = 0; cut <= text.length; cut++) {
      const parser = new SseParser()
      const blocks = [...parser.push(text.slice(0, cut)), ...parser.push(text.slice(cut))]
      expect(blocks, `cut at ${cut}`).toEqual([
        { id: "a", data: "one\n two\n", comments: [] },
        { event: "x", comments: [] }
      ])
    }
  })

  it("sets the last event id only when a block completes, and keeps it through blocks without an id", () => {
    const parser = new SseParser()
    expect(parser.push("id: 1\ndata: a\n\nid: 2\ndata: b\n")).toHaveLength(1)
    expect(parser.lastEventId).toBe("1")
    expect(parser.push("\n: heartbeat\n\nretry: x\n\n")).toEqual([
      { id: "2", data: "b", comments: [] },
      { comments: ["heartbeat"] },
      { comments: [] }
    ])
    expect(parser.lastEventId).toBe("2")
  })
})
