/**
 * REQUEST_TIMEOUT: 15 seconds by default, refused (naming the variable and the bound) when the database would not give
 * up before it, and Bun's idle timeout set past it.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Either } from "effect"
import { idleTimeoutSeconds, RequestTimeoutConfig } from "../src/Operations/Deadlines.js"

const read = (env: Record<string, string>) =>
  Effect.either(Effect.withConfigProvider(RequestTimeoutConfig, ConfigProvider.fromMap(new Map(Object.entries(env)))))

describe("REQUEST_TIMEOUT", () => {
  it.effect("defaults to 15 seconds, past the database's default bound (5 + 5 + 1 seconds)", () =>
    Effect.gen(function*() {
      expect(yield* read({})).toEqual(Either.right(Duration.seconds(15)))
      expect(yield* read({ REQUEST_TIMEOUT: "30 seconds", DB_QUERY_TIMEOUT: "20 seconds" })).toEqual(
        Either.right(Duration.seconds(30))
      )
    }))

  it.effect("is refused when the database would not give up first, naming the variable and the bound", () =>
    Effect.gen(function*() {
      for (const env of [{ REQUEST_TIMEOUT: "11s" }, { REQUEST_TIMEOUT: "15s", DB_QUERY_TIMEOUT: "10s" }]) {
        const result = yield* read(env)
        expect(Either.isLeft(result)).toBe(true)
        if (Either.isLeft(result)) {
          expect(String(result.left)).toContain("REQUEST_TIMEOUT")
          expect(String(result.left)).toContain("DB_CONNECT_TIMEOUT + DB_QUERY_TIMEOUT + 1 second")
        }
      }
      const tooLong = yield* read({ REQUEST_TIMEOUT: "10m" })
      expect(Either.isLeft(tooLong)).toBe(true)
    }))

  it("sets Bun's idle timeout past the deadline, within Bun's bound", () => {
    expect(idleTimeoutSeconds(Duration.seconds(15))).toBe(20)
    expect(idleTimeoutSeconds(Duration.millis(12_500))).toBe(18)
    expect(idleTimeoutSeconds(Duration.seconds(250))).toBe(255)
  })
})
