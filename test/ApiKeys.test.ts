/**
 * API keys on each backend, as several processes share them: a key issued by one process (a replica, or the CLI) is
 * accepted by every other, a revocation holds everywhere at once (no process keeps keys in memory), and `last used` is
 * written at most once a minute.
 */
import { expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted, TestClock } from "effect"
import { ApiKeys } from "../src/Auth/ApiKeys.js"
import * as Sql from "../src/Sql.js"
import { describeBackends } from "./support/backends.js"

describeBackends((backend) => {
  /** A process of its own on the database: its own connections, its own key service. */
  const processOn = (url: Redacted.Redacted<string>) =>
    Effect.flatMap(Layer.build(ApiKeys.Default.pipe(Layer.provide(Sql.layer(url)))), (context) =>
      Effect.provide(ApiKeys, context))

  it.scoped("a key issued by one process is accepted by another; a revocation by one is refused by the other at once", () =>
    Effect.gen(function*() {
      const url = yield* backend.freshDatabase
      const [cli, replica] = [yield* processOn(url), yield* processOn(url)]
      const issued = yield* cli.create("shared")
      expect(yield* replica.authenticate(issued.key)).toEqual(Option.some({ id: issued.id, name: "shared" }))
      expect(yield* cli.revoke(issued.id)).toBe(true)
      expect(yield* replica.authenticate(issued.key)).toEqual(Option.none())
      const listed = yield* replica.list
      expect(listed).toHaveLength(1)
      expect(listed[0].revokedAt).not.toBeNull()
      expect(Object.keys(listed[0]).sort()).toEqual(["createdAt", "id", "lastUsedAt", "name", "revokedAt"])
    }))

  it.scoped("an unknown id is not revoked, and a revocation keeps its first time", () =>
    Effect.gen(function*() {
      const keys = yield* processOn(yield* backend.freshDatabase)
      const issued = yield* keys.create("twice")
      expect(yield* keys.revoke("000000000000" as typeof issued.id)).toBe(false)
      expect(yield* keys.revoke(issued.id)).toBe(true)
      const [first] = yield* keys.list
      yield* TestClock.adjust("1 hour")
      expect(yield* keys.revoke(issued.id)).toBe(true)
      expect((yield* keys.list)[0].revokedAt).toBe(first.revokedAt)
    }))

  it.scoped("`last used` is written on use, then at most once a minute", () =>
    Effect.gen(function*() {
      const keys = yield* processOn(yield* backend.freshDatabase)
      const issued = yield* keys.create("busy")
      const lastUsed = Effect.map(keys.list, (all) => all[0].lastUsedAt)
      expect(yield* lastUsed).toBeNull()
      yield* keys.authenticate(issued.key)
      const first = yield* lastUsed
      expect(first).not.toBeNull()
      yield* TestClock.adjust("30 seconds")
      yield* keys.authenticate(issued.key)
      expect(yield* lastUsed).toBe(first)
      yield* TestClock.adjust("31 seconds")
      yield* keys.authenticate(issued.key)
      expect(Date.parse((yield* lastUsed)!) - Date.parse(first!)).toBe(61_000)
    }))

  it.scoped("a wrong secret under a known id is refused", () =>
    Effect.gen(function*() {
      const keys = yield* processOn(yield* backend.freshDatabase)
      const issued = yield* keys.create("exact")
      const key = Redacted.value(issued.key)
      const other = key.slice(0, -1) + (key.endsWith("A") ? "B" : "A")
      expect(yield* keys.authenticate(Redacted.make(other))).toEqual(Option.none())
    }))
})
