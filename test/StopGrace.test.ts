/**
 * The stop grace petstore ships covers a drain with the default settings (`SHUTDOWN_DELAY` + `SHUTDOWN_TIMEOUT`, as
 * `src/Config.ts` defaults them): `stop_grace_period` of each petstore service in `compose.yaml` (Compose's own
 * default, 10 s, when unset) and `TimeoutStopSec` in `ops/petstore.service`. Shorter, a stop kills the process
 * mid-drain. The figure docs/operations.md gives is theirs.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect } from "effect"
import { readFileSync } from "node:fs"
import { ShutdownDelay, ShutdownTimeout } from "../src/Config.js"

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), "utf8")

const UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }

/** A duration as Compose and systemd write it here: `20s`, `1m30s`, `500ms`. */
const parse = (text: string): Duration.Duration => {
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)]
  expect(parts.map(([part]) => part).join(""), `a duration such as 20s, not ${JSON.stringify(text)}`).toBe(text)
  return Duration.millis(parts.reduce((sum, [, amount, unit]) => sum + Number(amount) * UNITS[unit!]!, 0))
}

/** The drain's length with every setting at its default. */
const defaultDrain = Effect.gen(function*() {
  const delay = yield* ShutdownDelay
  const timeout = yield* ShutdownTimeout
  return Duration.sum(delay, timeout)
}).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map())))

describe("the stop grace", () => {
  it.effect("of each petstore service in compose.yaml covers the default drain", () =>
    Effect.gen(function*() {
      const drain = yield* defaultDrain
      const compose = Bun.YAML.parse(read("compose.yaml")) as {
        readonly services: Record<string, { readonly image?: string; readonly stop_grace_period?: string }>
      }
      const petstore = Object.entries(compose.services).filter(([, service]) => service.image?.startsWith("petstore:"))
      expect(petstore.map(([name]) => name)).toEqual(["petstore-1", "petstore-2"])
      for (const [name, service] of petstore) {
        const grace = parse(service.stop_grace_period ?? "10s")
        expect(Duration.greaterThanOrEqualTo(grace, drain), `${name}: ${Duration.format(grace)}`).toBe(true)
      }
    }))

  it.effect("of ops/petstore.service covers the default drain", () =>
    Effect.gen(function*() {
      const drain = yield* defaultDrain
      const grace = parse(/^TimeoutStopSec=(.*)$/m.exec(read("ops/petstore.service"))?.[1] ?? "")
      expect(Duration.greaterThanOrEqualTo(grace, drain), Duration.format(grace)).toBe(true)
    }))

  it.effect("docs/operations.md gives the default drain's figure", () =>
    Effect.gen(function*() {
      const seconds = Duration.toSeconds(yield* defaultDrain)
      expect(read("docs/operations.md")).toContain(
        `\`SHUTDOWN_DELAY\` + \`SHUTDOWN_TIMEOUT\` (${seconds} s with the defaults)`
      )
    }))
})
