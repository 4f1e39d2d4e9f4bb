/**
 * Idempotency-Key on createPet (draft-ietf-httpapi-idempotency-key-header-07), on each backend, through the engine.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Schema, TestClock } from "effect"
import { idempotencyKeyInUse, idempotencyKeyReused } from "../src/Domain/Errors.js"
import { IDEMPOTENCY_KEY_RULE, IdempotencyKey } from "../src/Domain/Idempotency.js"
import { PetId } from "../src/Domain/Pet.js"
import { isSamePayload, outcomeOf } from "../src/Pets/Idempotency.js"
import { describeBackends, describePostgres } from "./support/backends.js"
import { Outage, OutageSqlLive } from "./support/outage.js"
import { type App, appOn, appOnDatabase, appWith, countPets, createRequest, json } from "./support/retries.js"

const REX = { name: "Rex", categoryId: 3, status: "pending" }

const create = (app: App, body: unknown, idempotencyKey?: string, apiKey = app.key) =>
  app.fetch("/v1/pets", createRequest(apiKey, body, idempotencyKey))

/** Waits (in real time) until the condition holds, for background work that TestClock woke up. */
const eventually = (condition: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 100; i++) {
      if (yield* condition) return
      yield* Effect.promise(() => new Promise((done) => setTimeout(done, 20)))
    }
    expect(yield* condition).toBe(true)
  })

describe("the Idempotency-Key header", () => {
  const decode = Schema.decodeUnknownEither(IdempotencyKey)
  it("takes a structured-field string and a bare value as the same key", () => {
    expect(decode("\"abc\"")).toEqual(decode("abc"))
    expect(decode("\"8e03978e-40d5-43e8-bc93-6894a57f9324\"")._tag).toBe("Right")
    expect(decode("8e03978e-40d5-43e8-bc93-6894a57f9324")).toMatchObject({
      right: "8e03978e-40d5-43e8-bc93-6894a57f9324"
    })
    expect(decode("\"a\\\"b\\\\c\"")).toMatchObject({ right: "a\"b\\c" })
    expect(decode("\"abc\";x=1")).toMatchObject({ right: "abc" })
    expect(decode("\"abc\"; a;b=?0;c=tok/en;d=-1.5;e=:AAE=:;f=\"q\"")).toMatchObject({ right: "abc" })
    expect(decode("x".repeat(255))._tag).toBe("Right")
  })
  it("refuses an empty, long, spaced, non-ASCII or badly quoted key, saying what a key is", () => {
    for (
      const value of [
        "",
        "\"\"",
        "x".repeat(256),
        "a b",
        "\"a b\"",
        "clé",
        "\"abc",
        "\"a\\x\"",
        "\"abc\" x",
        "a\tb",
        "\"abc\";X=1",
        "\"abc\";x="
      ]
    ) {
      const result = decode(value)
      expect(result._tag, value).toBe("Left")
      if (result._tag === "Left") expect(result.left.message).toContain(IDEMPOTENCY_KEY_RULE)
    }
  })
  it("is encoded as the draft's structured-field string", () => {
    expect(Schema.encodeSync(IdempotencyKey)("a\"b")).toBe("\"a\\\"b\"")
  })
  it.scoped("a create the database could not take is 503 with Retry-After, and not remembered", () =>
    Effect.gen(function*() {
      const app = yield* appOnDatabase(OutageSqlLive)
      const outage = Context.get(app.context as unknown as Context.Context<Outage>, Outage)
      yield* outage.set(true)
      const failed = yield* create(app as App, REX, "outage")
      expect(failed.status).toBe(503)
      expect(failed.headers.get("retry-after")).toBe("1")
      yield* outage.set(false)
      const later = yield* create(app as App, { ...REX, name: "Max" }, "outage")
      expect(later.status).toBe(201)
      expect(later.headers.get("idempotent-replayed")).toBeNull()
    }))

  it("compares the decoded payload with the pet the first create made, field by field", () => {
    const pet = { id: PetId.make(7), name: "Rex", categoryId: 3, status: "available" } as const
    expect(isSamePayload({ name: "Rex", categoryId: 3, status: "available" }, pet)).toBe(true)
    expect(isSamePayload({ name: "Rex", categoryId: 3, status: "sold" }, pet)).toBe(false)
    expect(isSamePayload({ name: "Rex", categoryId: 4, status: "available" }, pet)).toBe(false)
    expect(isSamePayload({ name: "Max", categoryId: 3, status: "available" }, pet)).toBe(false)
  })

  it("tells the client what the store found: the pet made now or before, 409 while the key is held, 422 for another payload", () => {
    const pet = { id: PetId.make(7), name: "Rex", categoryId: 3, status: "available" } as const
    const sent = { name: "Rex", categoryId: 3, status: "available" } as const
    expect(Effect.runSyncExit(outcomeOf(sent, { _tag: "Created", pet }))).toEqual(
      Exit.succeed({ _tag: "Created", pet })
    )
    expect(Effect.runSyncExit(outcomeOf(sent, { _tag: "Recorded", pet }))).toEqual(
      Exit.succeed({ _tag: "Replayed", pet })
    )
    expect(Effect.runSyncExit(outcomeOf({ ...sent, status: "sold" }, { _tag: "Recorded", pet }))).toEqual(
      Exit.fail(idempotencyKeyReused())
    )
    expect(Effect.runSyncExit(outcomeOf(sent, { _tag: "InUse" }))).toEqual(Exit.fail(idempotencyKeyInUse()))
  })
})

/** How many pets hold an idempotency record. */
const recordsOf = (app: App) =>
  Effect.map(
    app.sql<{ readonly n: number | string }>`SELECT COUNT(*) AS n FROM pets WHERE idempotency_key IS NOT NULL`,
    (rows) => Number(rows[0].n)
  ).pipe(Effect.orDie)

describeBackends((backend) => {
  describe("Idempotency-Key", () => {
    it.scoped("a retry with the same key and payload is replayed: same status, body and Location, no new pet", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        const first = yield* create(app, REX, "order-1")
        expect(first.status).toBe(201)
        expect(first.headers.get("idempotent-replayed")).toBeNull()
        const body = yield* json(first)
        // Another spelling of the same payload: key order, white space, the quoted form of the key.
        const again = yield* create(app, `{ "status": "pending",  "categoryId": 3, "name": "  Rex " }`, "\"order-1\"")
        expect(again.status).toBe(201)
        expect(again.headers.get("idempotent-replayed")).toBe("true")
        expect(again.headers.get("location")).toBe(first.headers.get("location"))
        expect(yield* json(again)).toEqual(body)
        expect(yield* countPets(app)).toBe(1)
      }))

    it.scoped("the library's own server on the same registration answers alike: replay, 422, 400", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend, {}, { reference: true })
        const first = yield* create(app, REX, "app")
        expect(first.status).toBe(201)
        const again = yield* create(app, REX, "\"app\"")
        expect(again.headers.get("idempotent-replayed")).toBe("true")
        expect(again.headers.get("location")).toBe(first.headers.get("location"))
        expect((yield* create(app, { ...REX, name: "Max" }, "app")).status).toBe(422)
        expect((yield* create(app, REX, "a b")).status).toBe(400)
        expect(yield* countPets(app)).toBe(1)
      }))

    it.scoped("the default status counts as sent", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        expect((yield* create(app, { name: "Ada", categoryId: 1 }, "k")).status).toBe(201)
        const again = yield* create(app, { name: "Ada", categoryId: 1, status: "available" }, "k")
        expect(again.headers.get("idempotent-replayed")).toBe("true")
      }))

    it.scoped("the same key with another payload is 422 idempotency_key_reused, and adds nothing", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        expect((yield* create(app, REX, "order-2")).status).toBe(201)
        const other = yield* create(app, { ...REX, name: "Max" }, "order-2")
        expect(other.status).toBe(422)
        expect(yield* json(other)).toMatchObject({ code: "idempotency_key_reused", status: 422 })
        expect(yield* countPets(app)).toBe(1)
      }))

    it.scoped("keys are scoped to the API key: another key may use the same value for another pet", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        const other = yield* app.newKey("second")
        expect((yield* create(app, REX, "shared")).status).toBe(201)
        const theirs = yield* create(app, { ...REX, name: "Max" }, "shared", other)
        expect(theirs.status).toBe(201)
        expect(theirs.headers.get("idempotent-replayed")).toBeNull()
        expect(yield* countPets(app)).toBe(2)
      }))

    it.scoped("only a committed create is remembered: after a 400 or a 401 the key is still free", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        expect((yield* create(app, { name: "", categoryId: 3 }, "fresh")).status).toBe(400)
        expect((yield* create(app, REX, "fresh", "psk_000000000000_wrong")).status).toBe(401)
        const created = yield* create(app, REX, "fresh")
        expect(created.status).toBe(201)
        expect(created.headers.get("idempotent-replayed")).toBeNull()
      }))

    it.scoped("a header that is not a key is 400 invalid_header, naming the header and the rule, and adds nothing", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        for (const value of ["\"\"", "x".repeat(256), "\"unterminated", "a b"]) {
          const refused = yield* create(app, REX, value)
          expect(refused.status, value).toBe(400)
          const body = yield* json(refused)
          expect(body).toMatchObject({ code: "invalid_header", status: 400 })
          expect(body.message).toMatch(/idempotency-key/i)
          expect(body.message).toContain(IDEMPOTENCY_KEY_RULE)
        }
        expect(yield* countPets(app)).toBe(0)
      }))

    it.scoped("two concurrent requests with one key add exactly one pet; the other is 409 with Retry-After: 1 or a replay", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend)
        for (let round = 0; round < 10; round++) {
          const answers = yield* Effect.all([create(app, REX, `race-${round}`), create(app, REX, `race-${round}`)], {
            concurrency: "unbounded"
          })
          const statuses = answers.map((a) => a.status).sort()
          expect([[201, 201], [201, 409]]).toContainEqual(statuses)
          for (const answer of answers) {
            if (answer.status === 409) {
              expect(answer.headers.get("retry-after")).toBe("1")
              expect(yield* json(answer)).toMatchObject({ code: "idempotency_key_in_use", status: 409 })
            }
          }
          if (statuses[1] === 201) {
            expect(answers.filter((a) => a.headers.get("idempotent-replayed") === "true")).toHaveLength(1)
          }
        }
        expect(yield* countPets(app)).toBe(10)
      }))

    if (backend.name === "SQLite") {
      it.scoped("on SQLite a retry in the first's transaction, not yet durable, is 409; once it is, a replay", () =>
        Effect.gen(function*() {
          const app = yield* appWith(backend)
          // Sent together, the two run in one transaction of the writer: the second finds the key still being created.
          const answers = yield* Effect.all([create(app, REX, "overlap"), create(app, REX, "overlap")], {
            concurrency: "unbounded"
          })
          expect(answers.map((a) => a.status)).toEqual([201, 409])
          expect(answers[1].headers.get("retry-after")).toBe("1")
          const later = yield* create(app, REX, "overlap")
          expect(later.status).toBe(201)
          expect(later.headers.get("idempotent-replayed")).toBe("true")
          expect(later.headers.get("location")).toBe(answers[0].headers.get("location"))
          expect(yield* countPets(app)).toBe(1)
        }))
    }

    it.scoped("a record lives IDEMPOTENCY_TTL, then the key is free again and the record is pruned", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend, { IDEMPOTENCY_TTL: "10 seconds" })
        const records = recordsOf(app)
        expect((yield* create(app, REX, "ttl")).status).toBe(201)
        yield* TestClock.adjust("9 seconds")
        expect((yield* create(app, REX, "ttl")).headers.get("idempotent-replayed")).toBe("true")
        expect(yield* records).toBe(1)
        yield* TestClock.adjust("2 seconds")
        yield* eventually(Effect.map(records, (n) => n === 0))
        const later = yield* create(app, { ...REX, name: "Max" }, "ttl")
        expect(later.status).toBe(201)
        expect(later.headers.get("idempotent-replayed")).toBeNull()
        expect(yield* countPets(app)).toBe(2)
      }))

    it.scoped("a TTL under a second: records expire at once, and are pruned once a second, not every TTL", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend, { IDEMPOTENCY_TTL: "1 millis" })
        const records = recordsOf(app)
        expect((yield* create(app, REX, "brief")).status).toBe(201)
        yield* TestClock.adjust("999 millis")
        // Expired hundreds of times over, not yet pruned; already absent for a create.
        expect(yield* records).toBe(1)
        const again = yield* create(app, REX, "brief")
        expect(again.headers.get("idempotent-replayed")).toBeNull()
        yield* TestClock.adjust("1 second")
        yield* eventually(Effect.map(records, (n) => n === 0))
      }))

    it.scoped("an expired record not yet pruned does not count either", () =>
      Effect.gen(function*() {
        const app = yield* appWith(backend, { IDEMPOTENCY_TTL: "1 hour" })
        expect((yield* create(app, REX, "late")).status).toBe(201)
        // Past the TTL, before the pruner's next pass (every minute): the read itself ignores it.
        yield* TestClock.setTime(60 * 60 * 1000)
        const later = yield* create(app, { ...REX, name: "Max" }, "late")
        expect(later.status).toBe(201)
        expect(later.headers.get("idempotent-replayed")).toBeNull()
      }))
  })
})

describePostgres((backend) => {
  it.scoped("replicas: a key used on one replica is replayed by another; racing replicas add one pet", () =>
    Effect.gen(function*() {
      const a = yield* appWith(backend)
      const b = yield* appOn(a.url)
      const first = yield* create(a, REX, "across")
      const replayed = yield* create(b, REX, "across", a.key)
      expect(replayed.status).toBe(201)
      expect(replayed.headers.get("idempotent-replayed")).toBe("true")
      expect(yield* json(replayed)).toEqual(yield* json(first))
      for (let round = 0; round < 20; round++) {
        const answers = yield* Effect.all([create(a, REX, `race-${round}`), create(b, REX, `race-${round}`, a.key)], {
          concurrency: "unbounded"
        })
        const statuses = answers.map((answer) => answer.status).sort()
        expect([[201, 201], [201, 409]]).toContainEqual(statuses)
      }
      expect(yield* countPets(a)).toBe(21)
    }))
})
