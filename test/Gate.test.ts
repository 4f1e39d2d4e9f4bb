import { describe, expect, it } from "@effect/vitest"
import { MAX_BODY_BYTES } from "../src/Domain/Errors.js"
import * as Gate from "../src/Serving/Gate.js"
import * as Refusals from "../src/Serving/Refusals.js"

const encoder = new TextEncoder()

/** A POST whose body arrives in these chunks, then ends (or fails, when `fail` is set). */
const post = (chunks: ReadonlyArray<string>, headers: Record<string, string>, fail = false) =>
  new Request("http://localhost/v1/pets", {
    method: "POST",
    headers,
    body: new ReadableStream<Uint8Array>({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(encoder.encode(chunk))
        if (fail) controller.error(new Error("the client went away"))
        else controller.close()
      }
    })
  })

const text = (bytes: Uint8Array | Refusals.Refusal) =>
  bytes instanceof Uint8Array ? new TextDecoder().decode(bytes) : bytes

describe("Gate.readBody", () => {
  it("reads a body of declared length whole, however it arrives", async () => {
    const body = await Gate.readBody(post(["{\"name\":", "\"Rex\"}"], { "content-length": "14" }))
    expect(text(body)).toBe("{\"name\":\"Rex\"}")
  })

  it("reads a body sent in chunks (no declared length) whole", async () => {
    const body = await Gate.readBody(post(["[1,", "2]"], { "transfer-encoding": "chunked" }))
    expect(text(body)).toBe("[1,2]")
  })

  it("refuses a body sent in chunks once it passes the limit, unread past it", async () => {
    const chunk = "x".repeat(16 * 1024)
    const chunks = Array.from({ length: MAX_BODY_BYTES / chunk.length + 2 }, () => chunk)
    expect(await Gate.readBody(post(chunks, { "transfer-encoding": "chunked" }))).toBe(Refusals.payloadTooLarge)
  })

  it("answers a body that fails while being read as unreadable, with or without a declared length", async () => {
    expect(await Gate.readBody(post(["{\"na"], { "content-length": "14" }, true))).toBe(Refusals.unreadableBody)
    expect(await Gate.readBody(post(["{\"na"], { "transfer-encoding": "chunked" }, true))).toBe(
      Refusals.unreadableBody
    )
  })
})

describe("Refusals.decodeFailure", () => {
  const issue = (path: ReadonlyArray<string>, message: string) => ({ _tag: "Type" as const, path, message })

  it("names every invalid field of a body once, and cuts a long list short", () => {
    const listed = Refusals.decodeFailure(
      "body",
      [issue(["a"], "is missing"), issue(["b"], "no"), issue(["b"], "x")],
      () => false
    )
    expect(listed.message).toBe("Invalid request body: 'a' is missing; 'b' is invalid: no")
    const many = Array.from({ length: 20 }, (_, i) => issue([`field${i}`], "z".repeat(1000)))
    const { code, message, status } = Refusals.decodeFailure("body", many, () => false)
    expect({ code, status }).toEqual({ code: "invalid_body", status: 400 })
    expect(message.length).toBe(900)
    expect(message.startsWith(`Invalid request body: 'field0' is invalid: ${"z".repeat(299)}…; 'field1'`)).toBe(true)
    expect(message.endsWith("…")).toBe(true)
  })

  it("names only the first issue of a query, a path, a header", () => {
    const issues = [issue(["limit"], "must be an integer from 1 to 100"), issue(["status"], "no")]
    expect(Refusals.decodeFailure("query", issues, () => false).message).toBe(
      "Invalid query parameter 'limit': must be an integer from 1 to 100"
    )
  })
})
