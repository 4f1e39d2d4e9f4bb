/**
 * API keys: the pure helpers (format, hashing, constant-time check) and the service on an in-memory database (issue,
 * authenticate, revoke, list, last-use bookkeeping), with the test clock standing in for time.
 */
import { SqlClient, SqlError } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Either, Exit, Fiber, Layer, Option, Redacted, Ref, TestClock } from "effect"
import {
  ApiKeys,
  generateKey,
  hashKey,
  keyIdOf,
  LAST_USED_WRITE_INTERVAL,
  matchesHash,
  MAX_REMEMBERED,
  RECHECK_AFTER
} from "../src/Auth/ApiKeys.js"
import { ApiKeysRepo } from "../src/Auth/Repo.js"
import * as Sql from "../src/Database/Sql.js"
import type { ApiKeyId } from "../src/Domain/ApiKey.js"
import { describeBackends } from "./support/backends.js"
import { API_KEY_FORMAT, keysOfAnotherProcess } from "./support/keys.js"

/** The text of a key with its last character replaced by another valid one. */
const alterLast = (key: string) => key.slice(0, -1) + (key.endsWith("A") ? "B" : "A")

/** Tokens that are not well-formed keys, made from a real one. */
const malformed = (key: string) => [
  "",
  "psk",
  `Bearer ${key}`,
  ` ${key}`,
  `${key} `,
  `${key}\n`,
  `${key}A`,
  key.slice(0, -1),
  key.toUpperCase(),
  key.replace(/^psk_/, "pk_"),
  key.replace(/^psk_[0-9a-f]{12}_/, "psk_0123456789AB_"),
  key.replace(/^psk_[0-9a-f]{12}_/, "psk_0123456789a_"),
  key.slice(0, -1) + "=",
  key.slice(0, -1) + "+"
]

type KeyRecordRead = ReturnType<ApiKeysRepo["findById"]>

/**
 * A key service on the database behind `sql`, whose repository counts the key reads it makes and lets a test change
 * the next read (hold its answer, or fail it).
 */
const probedKeys = <E>(sql: Layer.Layer<SqlClient.SqlClient, E>) =>
  Effect.gen(function*() {
    const reads = yield* Ref.make(0)
    const nextRead = yield* Ref.make(Option.none<(read: KeyRecordRead) => KeyRecordRead>())
    const repo = Layer.effect(
      ApiKeysRepo,
      Effect.map(ApiKeysRepo, (real) =>
        ApiKeysRepo.make({
          ...real,
          findById: (id) =>
            Effect.flatMap(Ref.getAndSet(nextRead, Option.none()), (change) => {
              const read = Effect.zipLeft(real.findById(id), Ref.update(reads, (n) => n + 1))
              return Option.isSome(change) ? change.value(read) : read
            })
        }))
    ).pipe(Layer.provide(ApiKeysRepo.Default))
    const context = yield* Layer.build(
      ApiKeys.DefaultWithoutDependencies.pipe(Layer.provide(repo), Layer.provide(sql))
    )
    const keys = yield* Effect.provide(ApiKeys, context)
    return {
      keys,
      /** The key reads made so far. */
      reads: Ref.get(reads),
      /**
       * The next key read reads the row, then holds its answer until `release` completes; `read` completes once the
       * row has been read.
       */
      holdNextRead: Effect.gen(function*() {
        const read = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        yield* Ref.set(
          nextRead,
          Option.some((findById) =>
            findById.pipe(Effect.zipLeft(Deferred.succeed(read, undefined)), Effect.zipLeft(Deferred.await(release)))
          )
        )
        return { read, release } as const
      }),
      /** The next key read fails, as when the database is unreachable. */
      failNextRead: Ref.set(
        nextRead,
        Option.some(() => Effect.fail(new SqlError.SqlError({ cause: new Error("connection refused") })))
      )
    } as const
  })

describe("API key helpers", () => {
  it("generateKey makes a psk_<id>_<secret> key whose id is the key id", () => {
    const { id, key } = generateKey()
    const text = Redacted.value(key)
    expect(text).toMatch(API_KEY_FORMAT)
    expect(API_KEY_FORMAT.exec(text)?.[1]).toBe(id)
    expect(Buffer.from(text.slice(-43), "base64url")).toHaveLength(32)
    expect(String(key)).not.toContain(text)
  })

  it("generateKey draws fresh randomness for every key", () => {
    const keys = Array.from({ length: 100 }, () => generateKey())
    expect(new Set(keys.map((k) => k.id)).size).toBe(100)
    expect(new Set(keys.map((k) => Redacted.value(k.key).slice(-43))).size).toBe(100)
  })

  it("hashKey is the hex SHA-256 of the key", () => {
    expect(hashKey("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    expect(hashKey("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
  })

  it("keyIdOf reads the id of a well-formed key and nothing else", () => {
    const { id, key } = generateKey()
    const text = Redacted.value(key)
    expect(keyIdOf(text)).toEqual(Option.some(id))
    for (const token of malformed(text)) expect(keyIdOf(token), token).toEqual(Option.none())
  })

  it("matchesHash accepts the key the hash was made from and nothing else", () => {
    const key = Redacted.value(generateKey().key)
    const hash = hashKey(key)
    expect(matchesHash(key, hash)).toBe(true)
    expect(matchesHash(alterLast(key), hash)).toBe(false)
    expect(matchesHash(key, hashKey(alterLast(key)))).toBe(false)
    expect(matchesHash(key, hash.slice(0, -2))).toBe(false)
    expect(matchesHash(key, `${hash}00`)).toBe(false)
    expect(matchesHash(key, "")).toBe(false)
    expect(matchesHash(key, "not hex at all")).toBe(false)
  })
})

describe("ApiKeys", () => {
  /** A fresh in-memory database per test, with the SQL client alongside to look at the stored rows. */
  const withKeys = Effect.provide(ApiKeys.Default.pipe(Layer.provideMerge(Sql.SqlTest)))

  const authenticate = (key: string) => Effect.flatMap(ApiKeys, (keys) => keys.authenticate(Redacted.make(key)))
  const writeLastUsed = Effect.flatMap(ApiKeys, (keys) => keys.writeLastUsed)

  /** The one listed key with this id. */
  const listed = (id: string) =>
    Effect.map(Effect.flatMap(ApiKeys, (keys) => keys.list), (all) => {
      const matching = all.filter((key) => key.id === id)
      expect(matching).toHaveLength(1)
      return matching[0]
    })

  it.effect("a created key authenticates as itself", () =>
    Effect.gen(function*() {
      const keys = yield* ApiKeys
      const created = yield* keys.create("ci")
      const key = Redacted.value(created.key)
      expect(created.name).toBe("ci")
      expect(key).toMatch(API_KEY_FORMAT)
      expect(keyIdOf(key)).toEqual(Option.some(created.id))
      expect(yield* authenticate(key)).toEqual(Option.some({ id: created.id, name: "ci" }))
    }).pipe(withKeys))

  it.effect("only the hash is stored, never the key", () =>
    Effect.gen(function*() {
      const keys = yield* ApiKeys
      const sql = yield* SqlClient.SqlClient
      const created = yield* keys.create("ci")
      const key = Redacted.value(created.key)
      const rows = yield* sql<Record<string, unknown>>`SELECT * FROM api_keys`
      expect(rows).toHaveLength(1)
      expect(rows[0].id).toBe(created.id)
      expect(rows[0].hash).toBe(hashKey(key))
      const secret = key.slice(-43)
      for (const value of Object.values(rows[0])) {
        expect(String(value)).not.toContain(key)
        expect(String(value)).not.toContain(secret)
      }
    }).pipe(withKeys))

  it.effect("a key that differs in one character, or carries an unknown id, does not authenticate", () =>
    Effect.gen(function*() {
      const keys = yield* ApiKeys
      const created = yield* keys.create("ci")
      const key = Redacted.value(created.key)
      expect(yield* authenticate(alterLast(key))).toEqual(Option.none())
      expect(yield* authenticate(Redacted.value(generateKey().key))).toEqual(Option.none())
      expect(yield* authenticate(key)).toEqual(Option.some({ id: created.id, name: "ci" }))
    }).pipe(withKeys))

  it.effect("a malformed token does not authenticate", () =>
    Effect.gen(function*() {
      const keys = yield* ApiKeys
      const key = Redacted.value((yield* keys.create("ci")).key)
      for (const token of malformed(key)) expect(yield* authenticate(token), token).toEqual(Option.none())
    }).pipe(withKeys))

  it.effect("a revoked key no longer authenticates; revoking keeps the first revocation time", () =>
    Effect.gen(function*() {
      const keys = yield* ApiKeys
      const created = yield* keys.create("ci")
      const other = yield* keys.create("other")
      yield* TestClock.adjust("1 hour")
      expect(yield* keys.revoke(created.id)).toBe(true)
      expect(yield* authenticate(Redacted.value(created.key))).toEqual(Option.none())
      const revokedAt = new Date(60 * 60 * 1000).toISOString()
      expect((yield* listed(created.id)).revokedAt).toBe(revokedAt)

      yield* TestClock.adjust("1 hour")
      yield* keys.revoke(created.id)
      expect((yield* listed(created.id)).revokedAt).toBe(revokedAt)
      expect(yield* authenticate(Redacted.value(created.key))).toEqual(Option.none())

      // Other keys are untouched.
      expect((yield* listed(other.id)).revokedAt).toBeNull()
      expect(yield* authenticate(Redacted.value(other.key))).toEqual(Option.some({ id: other.id, name: "other" }))
    }).pipe(withKeys))

  it.effect("revoking an unknown id reports false and changes nothing", () =>
    Effect.gen(function*() {
      const keys = yield* ApiKeys
      const created = yield* keys.create("ci")
      expect(yield* keys.revoke(generateKey().id)).toBe(false)
      expect((yield* listed(created.id)).revokedAt).toBeNull()
      expect(Option.isSome(yield* authenticate(Redacted.value(created.key)))).toBe(true)
    }).pipe(withKeys))

  it.effect("list shows id, name and times in creation order, never the key or its hash", () =>
    Effect.gen(function*() {
      const keys = yield* ApiKeys
      const first = yield* keys.create("first")
      yield* TestClock.adjust("1 minute")
      const second = yield* keys.create("second")
      yield* keys.revoke(first.id)
      const all = yield* keys.list
      expect(all).toEqual([
        {
          id: first.id,
          name: "first",
          createdAt: "1970-01-01T00:00:00.000Z",
          lastUsedAt: null,
          revokedAt: "1970-01-01T00:01:00.000Z"
        },
        { id: second.id, name: "second", createdAt: "1970-01-01T00:01:00.000Z", lastUsedAt: null, revokedAt: null }
      ])
      const text = JSON.stringify(all)
      for (const { key } of [first, second]) {
        expect(text).not.toContain(Redacted.value(key))
        expect(text).not.toContain(hashKey(Redacted.value(key)))
      }
    }).pipe(withKeys))

  it.effect("authenticate records the last use, at most once a minute, written in the background", () =>
    Effect.gen(function*() {
      const keys = yield* ApiKeys
      const created = yield* keys.create("ci")
      const key = Redacted.value(created.key)
      yield* TestClock.adjust("10 seconds")
      expect((yield* listed(created.id)).lastUsedAt).toBeNull()

      yield* authenticate(key)
      // Noted, not written on the request's path: written within LAST_USED_WRITE_INTERVAL.
      expect((yield* listed(created.id)).lastUsedAt).toBeNull()
      yield* TestClock.adjust(LAST_USED_WRITE_INTERVAL)
      expect((yield* listed(created.id)).lastUsedAt).toBe("1970-01-01T00:00:10.000Z")

      yield* TestClock.adjust("58 seconds")
      yield* authenticate(key)
      yield* writeLastUsed
      expect((yield* listed(created.id)).lastUsedAt).toBe("1970-01-01T00:00:10.000Z")

      yield* TestClock.adjust("2 minutes")
      yield* authenticate(key)
      yield* writeLastUsed
      expect((yield* listed(created.id)).lastUsedAt).toBe("1970-01-01T00:03:09.000Z")

      // A failed attempt is not a use.
      yield* TestClock.adjust("5 minutes")
      yield* authenticate(alterLast(key))
      yield* writeLastUsed
      expect((yield* listed(created.id)).lastUsedAt).toBe("1970-01-01T00:03:09.000Z")
    }).pipe(withKeys))

  it.scoped("at most MAX_REMEMBERED keys are remembered: the one checked longest ago is asked about again", () =>
    Effect.gen(function*() {
      const { keys, reads } = yield* probedKeys(Sql.SqlTest)
      const names = Array.from({ length: MAX_REMEMBERED + 1 }, (_, i) => `key ${i}`)
      const issued = yield* Effect.forEach(names, keys.create, { concurrency: "unbounded" })
      for (const { key } of issued) expect(Option.isSome(yield* keys.authenticate(key))).toBe(true)
      expect(yield* reads).toBe(MAX_REMEMBERED + 1)

      // Within RECHECK_AFTER of every check: the newest keys are taken at their word, the oldest one was let go.
      for (const { key } of issued.slice(1)) {
        expect(Option.isSome(yield* keys.authenticate(key))).toBe(true)
      }
      expect(yield* reads).toBe(MAX_REMEMBERED + 1)
      expect(Option.isSome(yield* keys.authenticate(issued[0].key))).toBe(true)
      expect(yield* reads).toBe(MAX_REMEMBERED + 2)
    }))
})

// On each backend, as several processes share the keys: a process takes a key that passed at its word for
// RECHECK_AFTER at most (the contract allows one second), then asks the database again.
describeBackends((backend) => {
  it.scoped("a key issued by one process is accepted by another; a revocation by one is refused by the other within RECHECK_AFTER", () =>
    Effect.gen(function*() {
      expect(Duration.lessThan(RECHECK_AFTER, Duration.seconds(1))).toBe(true)
      const url = yield* backend.freshDatabase
      const [cli, replica] = [yield* keysOfAnotherProcess(url), yield* keysOfAnotherProcess(url)]
      const issued = yield* cli.create("shared")
      for (const process of [cli, replica]) {
        expect(yield* process.authenticate(issued.key)).toEqual(Option.some({ id: issued.id, name: "shared" }))
      }
      expect(yield* cli.revoke(issued.id)).toBe(true)
      // The revoking process refuses the key at once; the other one once its last check is RECHECK_AFTER old.
      expect(yield* cli.authenticate(issued.key)).toEqual(Option.none())
      yield* TestClock.adjust(Duration.subtract(RECHECK_AFTER, Duration.millis(1)))
      expect(yield* replica.authenticate(issued.key)).toEqual(Option.some({ id: issued.id, name: "shared" }))
      yield* TestClock.adjust(Duration.millis(1))
      expect(yield* replica.authenticate(issued.key)).toEqual(Option.none())
      yield* TestClock.adjust(RECHECK_AFTER)
      expect(yield* replica.authenticate(issued.key)).toEqual(Option.none())
      const listed = yield* replica.list
      expect(listed).toHaveLength(1)
      expect(listed[0].revokedAt).not.toBeNull()
      expect(Object.keys(listed[0]).sort()).toEqual(["createdAt", "id", "lastUsedAt", "name", "revokedAt"])
    }))

  it.scoped("an unknown id is not revoked, and a revocation keeps its first time", () =>
    Effect.gen(function*() {
      const keys = yield* keysOfAnotherProcess(yield* backend.freshDatabase)
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
      const keys = yield* keysOfAnotherProcess(yield* backend.freshDatabase)
      const issued = yield* keys.create("busy")
      const lastUsed = Effect.map(keys.list, (all) => all[0].lastUsedAt)
      expect(yield* lastUsed).toBeNull()
      yield* keys.authenticate(issued.key)
      yield* keys.writeLastUsed
      const first = yield* lastUsed
      expect(first).not.toBeNull()
      yield* TestClock.adjust("30 seconds")
      yield* keys.authenticate(issued.key)
      yield* keys.writeLastUsed
      expect(yield* lastUsed).toBe(first)
      yield* TestClock.adjust("31 seconds")
      yield* keys.authenticate(issued.key)
      yield* keys.writeLastUsed
      expect(Date.parse((yield* lastUsed)!) - Date.parse(first!)).toBe(61_000)
    }))

  it.scoped("a key that passed is taken at its word for RECHECK_AFTER, then the database is asked again", () =>
    Effect.gen(function*() {
      const { keys, reads } = yield* probedKeys(Sql.layer(yield* backend.freshDatabase))
      const issued = yield* keys.create("steady")
      const passes = Option.some({ id: issued.id, name: "steady" })
      expect(yield* keys.authenticate(issued.key)).toEqual(passes)
      expect(yield* reads).toBe(1)
      yield* TestClock.adjust(Duration.subtract(RECHECK_AFTER, Duration.millis(1)))
      expect(yield* keys.authenticate(issued.key)).toEqual(passes)
      expect(yield* reads).toBe(1)
      yield* TestClock.adjust(Duration.millis(1))
      expect(yield* keys.authenticate(issued.key)).toEqual(passes)
      expect(yield* reads).toBe(2)
      // The new check starts a new RECHECK_AFTER.
      yield* TestClock.adjust(Duration.subtract(RECHECK_AFTER, Duration.millis(1)))
      expect(yield* keys.authenticate(issued.key)).toEqual(passes)
      expect(yield* reads).toBe(2)
    }))

  it.scoped("refusals and failed lookups are never remembered", () =>
    Effect.gen(function*() {
      const { failNextRead, keys, reads } = yield* probedKeys(Sql.layer(yield* backend.freshDatabase))
      const issued = yield* keys.create("refused")
      const key = Redacted.value(issued.key)
      const wrong = Redacted.make(key.slice(0, -1) + (key.endsWith("A") ? "B" : "A"))
      const unknown = generateKey().key
      for (const token of [wrong, wrong, unknown, unknown]) {
        expect(yield* keys.authenticate(token)).toEqual(Option.none())
      }
      expect(yield* reads).toBe(4)

      yield* failNextRead
      const failed = yield* Effect.either(keys.authenticate(issued.key))
      expect(Either.isLeft(failed) && failed.left._tag).toBe("SqlError")
      expect(yield* keys.authenticate(issued.key)).toEqual(Option.some({ id: issued.id, name: "refused" }))
      expect(yield* reads).toBe(5)

      yield* keys.revoke(issued.id)
      expect(yield* keys.authenticate(issued.key)).toEqual(Option.none())
      expect(yield* keys.authenticate(issued.key)).toEqual(Option.none())
      expect(yield* reads).toBe(7)
    }))

  /**
   * `check` of a new key, started while the key is valid: its read of the key's row is held until the key has been
   * revoked (the revocation commits before the read finishes). Its exit, the key and the service.
   */
  const checkedAcrossRevocation = <A, E>(
    check: (
      keys: ApiKeys,
      issued: { readonly id: ApiKeyId; readonly key: Redacted.Redacted<string> }
    ) => Effect.Effect<A, E>
  ) =>
    Effect.gen(function*() {
      const { holdNextRead, keys } = yield* probedKeys(Sql.layer(yield* backend.freshDatabase))
      const issued = yield* keys.create("raced")
      const { read, release } = yield* holdNextRead
      const inFlight = yield* Effect.fork(check(keys, issued))
      yield* Deferred.await(read)
      expect(yield* keys.revoke(issued.id)).toBe(true)
      yield* Deferred.succeed(release, undefined)
      return { exit: yield* inFlight.await, issued, keys }
    })

  it.scoped("a lookup that read the key before this process revoked it does not bring the key back", () =>
    Effect.gen(function*() {
      const { exit, issued, keys } = yield* checkedAcrossRevocation((keys, { key }) => keys.authenticate(key))
      // It started before the revocation: it may pass.
      expect(exit).toEqual(Exit.succeed(Option.some({ id: issued.id, name: "raced" })))
      // Every check that starts after the revocation refuses the key.
      expect(yield* keys.authenticate(issued.key)).toEqual(Option.none())
      yield* TestClock.adjust(Duration.subtract(RECHECK_AFTER, Duration.millis(1)))
      expect(yield* keys.authenticate(issued.key)).toEqual(Option.none())
    }))

  it.scoped("a record read before this process revoked the key is not kept for the streams' revocation check", () =>
    Effect.gen(function*() {
      const { exit, issued, keys } = yield* checkedAcrossRevocation((keys, { id }) => keys.isRevoked(id))
      // It started before the revocation: it may say the key is not revoked.
      expect(exit).toEqual(Exit.succeed(false))
      // Every check that starts after the revocation sees it.
      expect(yield* keys.isRevoked(issued.id)).toBe(true)
      yield* TestClock.adjust(Duration.subtract(RECHECK_AFTER, Duration.millis(1)))
      expect(yield* keys.isRevoked(issued.id)).toBe(true)
    }))

  it.scoped("the feed's revocation check reads after it is asked; the checks made while a read runs share the next", () =>
    Effect.gen(function*() {
      const url = yield* backend.freshDatabase
      const { holdNextRead, keys, reads } = yield* probedKeys(Sql.layer(url))
      const issued = yield* keys.create("followed")
      expect(yield* keys.isRevoked(issued.id)).toBe(false)
      expect(yield* reads).toBe(1)
      // A read that runs while another process revokes the key: the checks asked meanwhile wait for the next read.
      const { read, release } = yield* holdNextRead
      const first = yield* Effect.fork(keys.isRevoked(issued.id))
      yield* Deferred.await(read)
      expect(yield* (yield* keysOfAnotherProcess(url)).revoke(issued.id)).toBe(true)
      const later = yield* Effect.fork(Effect.all(Array.from({ length: 5 }, () => keys.isRevoked(issued.id)), {
        concurrency: "unbounded"
      }))
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
      yield* Deferred.succeed(release, undefined)
      expect(yield* Fiber.join(first)).toBe(false)
      expect(yield* Fiber.join(later)).toEqual([true, true, true, true, true])
      expect(yield* reads).toBe(3)
    }))

  it.scoped("a wrong secret under a known id is refused", () =>
    Effect.gen(function*() {
      const keys = yield* keysOfAnotherProcess(yield* backend.freshDatabase)
      const issued = yield* keys.create("exact")
      const key = Redacted.value(issued.key)
      const other = key.slice(0, -1) + (key.endsWith("A") ? "B" : "A")
      expect(yield* keys.authenticate(Redacted.make(other))).toEqual(Option.none())
    }))
})
