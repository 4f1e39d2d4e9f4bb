/** `LOG_FORMAT=pretty`: one line per entry, a request's line readable at a glance. */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Logger } from "effect"
import { prettyLineLogger } from "../src/Operations/Logging.js"

/** The lines `effect` logs in the pretty format. */
const loggedBy = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    yield* Effect.exit(effect.pipe(
      Effect.provide(Logger.replace(Logger.defaultLogger, Logger.map(prettyLineLogger, (line) => lines.push(line))))
    ))
    return lines
  })

describe("LOG_FORMAT=pretty", () => {
  it.effect("a request is one line: time, level, method, path, status, duration, then its annotations", () =>
    Effect.gen(function*() {
      const lines = yield* loggedBy(
        Effect.logInfo("request").pipe(Effect.annotateLogs({
          requestId: "a9443772",
          keyId: "2e327d3ae4b1",
          method: "GET",
          path: "/v1/pets",
          status: 200,
          durationMs: 1.25
        }))
      )
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(
        /^\d{2}:\d{2}:\d{2}\.\d{3} INFO {2}request GET \/v1\/pets 200 1\.25ms requestId=a9443772 keyId=2e327d3ae4b1$/
      )
    }))

  it.effect("another entry is one line with its annotations as key=value, quoted when they hold a space", () =>
    Effect.gen(function*() {
      const lines = yield* loggedBy(
        Effect.logWarning("PostgreSQL is not ready yet; retrying").pipe(
          Effect.annotateLogs({ reason: "connect ECONNREFUSED 127.0.0.1:1", attempt: 2 })
        )
      )
      expect(lines).toEqual([
        expect.stringMatching(
          /^\S+ WARN {2}PostgreSQL is not ready yet; retrying reason="connect ECONNREFUSED 127\.0\.0\.1:1" attempt=2$/
        )
      ])
    }))

  it.effect("a failure's cause follows its line, indented", () =>
    Effect.gen(function*() {
      const [line] = yield* loggedBy(Effect.logError("unexpected", Cause.die(new Error("disk on fire"))))
      const [first, ...rest] = line.split("\n")
      expect(first).toMatch(/ ERROR unexpected$/)
      expect(rest.length).toBeGreaterThan(0)
      expect(rest.every((text) => text.startsWith("    "))).toBe(true)
      expect(rest.join("\n")).toContain("disk on fire")
    }))
})
