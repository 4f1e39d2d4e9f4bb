/**
 * Issuing, listing, revoking and checking API keys. A key is checked against the database, its stored hash compared in
 * constant time; a key that passed is taken at its word for `RECHECK_AFTER` before the database is asked again, so a
 * revocation made by another process holds within that time (the contract's bound is one second), one made by this
 * process at once. `isRevoked`, for those that follow the feed, asks the database each time.
 */
import type { SqlError } from "@effect/sql"
import { Clock, Deferred, Duration, Effect, Exit, FiberId, Option, Redacted } from "effect"
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import { type ApiKeyId, type AuthenticatedKey, KEY_PREFIX } from "../Domain/ApiKey.js"
import { ApiKeysRepo } from "./Repo.js"

const KEY_PATTERN = new RegExp(`^${KEY_PREFIX}_([0-9a-f]{12})_[A-Za-z0-9_-]{43}$`)

/** A new key: the prefix, a 48-bit public id and a 256-bit secret. */
export const generateKey = (): { readonly id: ApiKeyId; readonly key: Redacted.Redacted<string> } => {
  const id = randomBytes(6).toString("hex") as ApiKeyId
  return { id, key: Redacted.make(`${KEY_PREFIX}_${id}_${randomBytes(32).toString("base64url")}`) }
}

export const hashKey = (key: string): string => createHash("sha256").update(key).digest("hex")

/** The key id a well-formed key carries. */
export const keyIdOf = (key: string): Option.Option<ApiKeyId> =>
  Option.fromNullable(KEY_PATTERN.exec(key)?.[1] as ApiKeyId | undefined)

/** Constant-time comparison of a presented key with a stored hash. */
export const matchesHash = (key: string, storedHash: string): boolean => {
  const presented = createHash("sha256").update(key).digest()
  const stored = Buffer.from(storedHash, "hex")
  return stored.length === presented.length && timingSafeEqual(presented, stored)
}

/** `last used` is written at most once a minute per key, so reads do not turn into writes. */
const TOUCH_INTERVAL_MS = 60_000

/**
 * `last used` is best effort, off the request's path: the uses are noted in memory and written together this often
 * (and when the service closes); a write that fails is logged, and the use is noted again at the key's next check.
 */
export const LAST_USED_WRITE_INTERVAL = Duration.seconds(1)

/** How long a key that passed the check is taken at its word before the database is asked again. */
export const RECHECK_AFTER = Duration.millis(500)
const RECHECK_AFTER_MS = Duration.toMillis(RECHECK_AFTER)

/** At most this many keys are remembered at once (refusals never are); past it, the one checked longest ago goes. */
export const MAX_REMEMBERED = 1024

const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())

/** A key that passed the check: when, and the answer to give while that check is fresh. */
interface Passed {
  readonly at: number
  readonly id: ApiKeyId
  readonly answer: Effect.Effect<Option.Option<AuthenticatedKey>>
}

export class ApiKeys extends Effect.Service<ApiKeys>()("Auth/ApiKeys", {
  scoped: Effect.gen(function*() {
    const repo = yield* ApiKeysRepo
    const clock = yield* Effect.clock

    /**
     * Keys that passed the check, by the key's text, in the order of their last check. Entries past RECHECK_AFTER are
     * never answered from; they are dropped at the next check (`sweep`, at most once per RECHECK_AFTER), so a key's
     * text is not kept long after its use.
     *
     * Effect's `Cache` does not fit here: it stores every lookup's outcome, refusals and failures included (served
     * again until the clock moves on, and taking the place of keys that passed); its access order keeps a node with
     * the key's text for every lookup until the cache is over capacity, so below capacity it grows without bound; and
     * a lookup still pending when its key is invalidated stores its outcome when it completes.
     */
    const passed = new Map<string, Passed>()
    /**
     * Revocations made by this process so far. A check remembers its key only if no revocation was made while it
     * read the database: a read that saw the key before a revocation must not answer for it after.
     */
    let revocations = 0
    let sweptAt = 0
    const isFresh = (checkedAt: number, at: number) => at >= checkedAt && at - checkedAt < RECHECK_AFTER_MS
    const sweep = (at: number) => {
      if (isFresh(sweptAt, at)) return
      sweptAt = at
      for (const [text, entry] of passed) if (!isFresh(entry.at, at)) passed.delete(text)
    }
    const remember = (text: string, entry: Passed) => {
      passed.delete(text)
      if (passed.size >= MAX_REMEMBERED) passed.delete(passed.keys().next().value!)
      passed.set(text, entry)
    }
    /** Forgets the key with this id, and makes the checks under way when it is called remember nothing. */
    const forget = (id: ApiKeyId) =>
      Effect.sync(() => {
        revocations++
        for (const [text, entry] of passed) if (entry.id === id) passed.delete(text)
      })

    /** Uses not written yet: by key id, the time of the first use since the last write. */
    const unwritten = new Map<ApiKeyId, string>()
    /** Writes the uses noted so far (all in one group commit on SQLite); a failure is logged, never raised. */
    const writeLastUsed = Effect.suspend(() => {
      const uses = [...unwritten]
      unwritten.clear()
      return Effect.forEach(uses, ([id, at]) =>
        repo.touch(id, at).pipe(
          Effect.catchAll((error) =>
            Effect.logWarning("could not record the last use of an API key", error).pipe(
              Effect.annotateLogs("keyId", id)
            )
          )
        ), { concurrency: "unbounded", discard: true })
    })
    yield* Effect.addFinalizer(() => writeLastUsed.pipe(Effect.timeoutOption("1 second")))
    const scope = yield* Effect.scope
    const writeLater = Effect.forkIn(Effect.delay(writeLastUsed, LAST_USED_WRITE_INTERVAL), scope)
    /** Notes a use; the first noted since the last write starts the next one, in the background. */
    const noteUse = (id: ApiKeyId, at: number) =>
      Effect.suspend(() => {
        const first = unwritten.size === 0
        if (!unwritten.has(id)) unwritten.set(id, new Date(at).toISOString())
        return first ? Effect.asVoid(writeLater) : Effect.void
      })

    const create = (name: string) =>
      Effect.gen(function*() {
        const { id, key } = generateKey()
        yield* repo.insert({ id, name, hash: hashKey(Redacted.value(key)), createdAt: yield* now })
        return { id, name, key } as const
      }).pipe(Effect.withSpan("ApiKeys.create"))

    /**
     * Marks a key revoked, here at once; false when no key has that id. The key is forgotten once the database has
     * answered, whatever the answer (a revocation whose answer was lost may still have been made).
     */
    const revoke = (id: ApiKeyId) =>
      Effect.flatMap(now, (at) => repo.revoke(id, at)).pipe(
        Effect.ensuring(forget(id)),
        Effect.withSpan("ApiKeys.revoke")
      )

    /**
     * `isRevoked`'s reads, by key id, while one runs: the answer the checks made since it began wait for, which the
     * next read gives. One read per key at a time, however many ask.
     */
    const checks = new Map<ApiKeyId, { next: Deferred.Deferred<boolean> | undefined }>()
    const readChecks = (id: ApiKeyId, under: { next: Deferred.Deferred<boolean> | undefined }) => {
      let answer: Deferred.Deferred<boolean> | undefined
      return Effect.gen(function*() {
        while ((answer = under.next) !== undefined) {
          under.next = undefined
          const read = repo.findById(id).pipe(
            Effect.map((found) => Option.isNone(found) || found.value.revokedAt !== null),
            Effect.orElseSucceed(() => false)
          )
          Deferred.unsafeDone(answer, yield* Effect.exit(read))
        }
        checks.delete(id) // in the step that found no check waiting
      }).pipe(Effect.onInterrupt(() =>
        Effect.sync(() => {
          // The service closes: nobody waits for a read that will not come.
          checks.delete(id)
          for (const left of [answer, under.next]) {
            if (left !== undefined) Deferred.unsafeDone(left, Exit.interrupt(FiberId.none))
          }
        })
      ))
    }
    /**
     * Whether the key with this id is revoked (or gone), as a read of the database begun after the call says: what
     * was committed before, here or elsewhere, it sees. A read that fails counts as not revoked, to be looked at again.
     */
    const isRevoked = (id: ApiKeyId): Effect.Effect<boolean> =>
      Effect.suspend(() => {
        const running = checks.get(id)
        const under = running ?? { next: undefined }
        const answer = under.next ??= Deferred.unsafeMake<boolean>(FiberId.none)
        if (running !== undefined) return Deferred.await(answer)
        checks.set(id, under)
        return Effect.zipRight(Effect.forkIn(readChecks(id, under), scope), Deferred.await(answer))
      })

    /**
     * The key a bearer token stands for, if it is a known, unrevoked key. Runs on every request: without a span (a
     * span per request costs more than the lookup itself).
     */
    const authenticate = (
      token: Redacted.Redacted<string>
    ): Effect.Effect<Option.Option<AuthenticatedKey>, SqlError.SqlError> =>
      Effect.suspend(() => {
        const key = Redacted.value(token)
        const at = clock.unsafeCurrentTimeMillis()
        if (passed.size > 0) sweep(at)
        const known = passed.get(key)
        if (known !== undefined && isFresh(known.at, at)) return known.answer
        const id = keyIdOf(key)
        if (Option.isNone(id)) return Effect.succeedNone
        const revocationsBefore = revocations
        return Effect.flatMap(repo.findById(id.value), (found) => {
          if (Option.isNone(found)) return Effect.succeedNone
          const record = found.value
          if (!matchesHash(key, record.hash) || record.revokedAt !== null) return Effect.succeedNone
          const answer = Effect.succeed(Option.some<AuthenticatedKey>({ id: record.id, name: record.name }))
          if (revocations === revocationsBefore) remember(key, { at, id: record.id, answer })
          return record.lastUsedAt !== null && at - Date.parse(record.lastUsedAt) < TOUCH_INTERVAL_MS
            ? answer
            : Effect.zipRight(noteUse(record.id, at), answer)
        })
      })

    return { create, list: repo.list, revoke, authenticate, isRevoked, writeLastUsed } as const
  }),
  dependencies: [ApiKeysRepo.Default]
}) {}
