/**
 * The duration variables: a number and a unit, or a bare `0` where zero means something ("none": no delay, no wait,
 * no retry); the waits that zero would turn off or make meaningless refuse it, naming the variable.
 */
import { describe, expect, it } from "@effect/vitest"
import { type Config, ConfigProvider, Duration, Effect, Either } from "effect"
import { describeConfigError, parseDuration, ShutdownDelay, ShutdownTimeout } from "../src/Config.js"
import { PostgresTimeoutsConfig } from "../src/Database/Sql.js"
import { RequestTimeoutConfig } from "../src/Operations/Deadlines.js"
import { IdempotencyTtl } from "../src/Pets/Idempotency.js"

const read = <A>(config: Config.Config<A>, env: Record<string, string>) =>
  Effect.either(Effect.withConfigProvider(config, ConfigProvider.fromMap(new Map(Object.entries(env)))))

describe("durations", () => {
  it("a bare 0 is a duration of zero, as are 0s and 0 seconds", () => {
    for (const text of ["0", "0s", "0 seconds", "0.0", "00"]) {
      expect(parseDuration(text)).toEqual(Either.right(Duration.zero))
    }
    expect(parseDuration("2s")).toEqual(Either.right(Duration.seconds(2)))
    expect(Either.isLeft(parseDuration("01"))).toBe(true)
    expect(Either.isLeft(parseDuration("-0"))).toBe(true)
  })

  it.effect("SHUTDOWN_DELAY, SHUTDOWN_TIMEOUT and DB_STARTUP_TIMEOUT accept 0", () =>
    Effect.gen(function*() {
      expect(yield* read(ShutdownDelay, { SHUTDOWN_DELAY: "0" })).toEqual(Either.right(Duration.zero))
      expect(yield* read(ShutdownTimeout, { SHUTDOWN_TIMEOUT: "0" })).toEqual(Either.right(Duration.zero))
      const timeouts = yield* read(PostgresTimeoutsConfig, { DB_STARTUP_TIMEOUT: "0" })
      expect(Either.map(timeouts, (timeouts) => timeouts.startup)).toEqual(Either.right(Duration.zero))
    }))

  for (
    const [variable, config] of [
      ["DB_CONNECT_TIMEOUT", PostgresTimeoutsConfig],
      ["DB_QUERY_TIMEOUT", PostgresTimeoutsConfig],
      ["REQUEST_TIMEOUT", RequestTimeoutConfig],
      ["IDEMPOTENCY_TTL", IdempotencyTtl]
    ] as const
  ) {
    it.effect(`${variable}=0 is refused: it must be positive`, () =>
      Effect.gen(function*() {
        const result = yield* read(config as Config.Config<unknown>, { [variable]: "0" })
        expect(Either.isLeft(result)).toBe(true)
        const message = Either.isLeft(result) ? describeConfigError(result.left) : ""
        expect(message).toMatch(new RegExp(`^${variable} must be a positive duration such as .* \\(got "0"\\)$`))
      }))
  }

  it.effect("a duration that is not one names the variable and the accepted forms, 0 among them", () =>
    Effect.gen(function*() {
      const result = yield* read(ShutdownDelay, { SHUTDOWN_DELAY: "soon" })
      expect(Either.isLeft(result) ? describeConfigError(result.left) : "").toBe(
        `SHUTDOWN_DELAY must be a duration such as 2s, 500ms, 2 seconds, 1 minute, or 0 (got "soon")`
      )
    }))
})
