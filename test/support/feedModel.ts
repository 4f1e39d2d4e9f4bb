/**
 * A model of the change feed, run by fast-check's model-based testing (`FastCheck.commands`, `asyncModelRun`) against a
 * feed served by one or more replicas of one database (`FeedSystem`: in process, or the compiled executable). The
 * commands create pets (plain, idempotent and replayed, in bursts, and in transactions that roll back after their
 * insert), open followers at random positions (`start`, `now`, a list's `Feed-Position`, a past one) with and without
 * a `status` filter (event streams read fast, slowly or stopped, and long polls), cut streams so that they reconnect
 * with `Last-Event-ID` on any replica, revoke keys, drain replicas and restart them.
 *
 * The followers reconnect as `EventSource` does (a stream ended by a drain, `slow_consumer` or a cut opens again with
 * its last id) and poll as the documented loop does. At the end of a run every follower has caught up with the feed,
 * and the invariants are checked against the database's own commit order (`checkRun`): each committed pet that matches
 * a follower's filter came to it exactly once, in commit order, from where it started (a contiguous run of the feed),
 * with the fields the database holds; no rolled-back pet came to anyone; no pet created after its key's revocation
 * (past the grace `docs/operations.md` and `docs/feed.md` give) came to that key's followers, whose streams end with
 * `unauthorized` and whose polls with a 401; every stream ended for a reason (a drain of its replica, a restart, its
 * client, a revocation, `slow_consumer` to a client that stopped or slowed), never `reset` for a position of the feed.
 */
import { FastCheck as fc } from "effect"
import { appendFileSync } from "node:fs"
import { type Block, readEvents } from "./sse.js"

export const STATUSES = ["available", "pending", "sold"] as const
type Status = (typeof STATUSES)[number]

/** A pet as the database holds it after the run, with its feed position. */
export interface Committed {
  readonly id: number
  readonly position: number
  readonly name: string
  readonly status: string
}

/** The feed's servers and their database, as the model drives them. */
export interface FeedSystem {
  /** How many servers serve the one database. */
  readonly replicas: number
  readonly fetch: (replica: number, path: string, init?: RequestInit) => Promise<Response>
  /** API keys: the first creates and is never revoked; each follower uses one of them. */
  readonly keys: ReadonlyArray<string>
  /** A create whose transaction rolls back after its insert: the pet so named never commits. */
  readonly rolledBack: (replica: number, pet: { readonly name: string; readonly status: Status }) => Promise<void>
  /** Revokes the key (through that replica, or as the operator's command does). */
  readonly revoke: (replica: number, key: string) => Promise<void>
  /** Drains the replica (its listener stops accepting, its streams end), then serves it again. */
  readonly drain: (replica: number) => Promise<void>
  /** How many servers have served as this replica so far: a request goes to the one serving when it is sent. */
  readonly generation: (replica: number) => number
  /** Kills the replica without a drain and starts it again, where the system can. */
  readonly restart?: ((replica: number) => Promise<void>) | undefined
  /** Every committed pet, in commit order. */
  readonly committed: () => Promise<ReadonlyArray<Committed>>
}

/** How long a revoked key's followers may still be handed new pets: a stream ends within a second, a poll half. */
const STREAM_GRACE_MS = 1_000
const POLL_GRACE_MS = 500
/** How long the followers get, after the last command, to reach the end of the feed. */
const CATCH_UP_MS = 15_000
const POLL_WAIT_SECONDS = 1
/** A long poll answers by its `wait` plus this margin, or is taken for hung. */
const POLL_MARGIN_MS = 4_000

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))
const positionOf = (id: string) => Number(id.slice(id.indexOf(".") + 1))

interface Delivered {
  readonly position: number
  readonly pet: { readonly id: number; readonly name: string; readonly status: string }
}

/** What happened in one run, for the checks at its end. */
class Run {
  readonly followers: Array<Follower> = []
  readonly violations: Array<string> = []
  /** The pets acknowledged with a 201, and when each create was sent. */
  readonly acknowledged = new Map<number, { readonly sentAt: number }>()
  readonly sent = new Map<string, number>()
  readonly rolledBackNames = new Set<string>()
  /** When each key's revocation was answered. */
  readonly revokedAt = new Map<string, number>()
  /** The keys whose revocation was sent: from then on a 401 may come before the revocation is answered. */
  readonly revoking = new Set<string>()
  /** Per replica: how many drains and restarts began (a stream opened before one may end without an event). */
  readonly interruptions: Array<number>
  /** The replicas being drained or restarted now. */
  readonly draining = new Set<number>()
  /** Positions a list answered, for followers that start at a past one. */
  readonly listed: Array<string> = []
  readonly idempotencyKeys: Array<{ readonly key: string; readonly body: string }> = []
  names = 0
  constructor(readonly system: FeedSystem) {
    this.interruptions = Array.from({ length: system.replicas }, () => 0)
  }
  violation(message: string) {
    this.violations.push(message)
  }
  name(prefix: string) {
    return `${prefix}${this.names++}`
  }
  /** The feed's end now, as a list's `Feed-Position` says it (through any replica that answers). */
  async end(): Promise<string> {
    for (let attempt = 0;; attempt++) {
      const replica = attempt % this.system.replicas
      const response = await this.system.fetch(replica, "/v1/pets?limit=1", bearer(this.system.keys[0]))
        .catch(() => undefined)
      await response?.arrayBuffer()
      const position = response?.status === 200 ? response.headers.get("feed-position") : null
      if (position !== null) return position
      if (attempt > 200) throw new Error("no replica answered a list")
      await sleep(50)
    }
  }
}

const bearer = (key: string, headers: Record<string, string> = {}): RequestInit => ({
  headers: { authorization: `Bearer ${key}`, ...headers }
})

type From = "start" | "now" | "list" | "past"

abstract class Follower {
  readonly received: Array<Delivered> = []
  /** Every pet must come after `lo`; every one after `hi` must come (`now` resolves somewhere between). */
  lo = 0
  hi = 0
  /** Ended for good: revoked, refused, or finished by the run. */
  done = false
  finished = false
  looping: Promise<void> = Promise.resolve()
  constructor(
    readonly run: Run,
    readonly index: number,
    readonly key: string,
    readonly status: Status | undefined,
    readonly after: string,
    public replica: number
  ) {}
  abstract readonly grace: number
  abstract readonly label: string
  /** The position it has moved past (delivered or passed over). */
  abstract reached(): number
  abstract stop(): void
  revoked() {
    return this.run.revoking.has(this.key)
  }
  deliver(position: number, pet: Delivered["pet"]) {
    this.received.push({ position, pet })
  }
}

/** An event stream, reconnecting with `Last-Event-ID` as `EventSource` does. */
class StreamFollower extends Follower {
  readonly grace = STREAM_GRACE_MS
  last: string | undefined
  paused: { readonly promise: Promise<void>; readonly resume: () => void } | undefined
  wasPaused = false
  /** Settles once its first connection has been answered (or the follower has ended). */
  connected!: Promise<void>
  private answered: () => void = () => {}
  cut: (() => void) | undefined
  /** Where the current connection was opened: its replica, its drains and restarts begun, its server. */
  openedAt: { readonly replica: number; readonly interruptions: number; readonly generation: number } | undefined
  constructor(
    run: Run,
    index: number,
    key: string,
    status: Status | undefined,
    after: string,
    replica: number,
    readonly slow: boolean
  ) {
    super(run, index, key, status, after, replica)
  }
  get label() {
    return `stream ${this.index} (${this.slow ? "slow" : "fast"}, after=${this.after}, status=${this.status})`
  }
  reached() {
    return this.last === undefined ? this.hi : positionOf(this.last)
  }
  pause() {
    if (this.paused !== undefined) return
    let resume!: () => void
    const promise = new Promise<void>((done) => resume = done)
    this.paused = { promise, resume }
    this.wasPaused = true
  }
  resume() {
    const paused = this.paused
    this.paused = undefined
    paused?.resume()
  }
  stop() {
    this.finished = true
    this.resume()
    this.cut?.()
  }
  start() {
    this.connected = new Promise((done) => this.answered = done)
    this.looping = this.loop().finally(() => this.answered())
  }
  private async loop() {
    const { run } = this
    while (!this.done && !this.finished) {
      // A client that has stopped reading opens no stream until it reads again.
      if (this.paused !== undefined) await this.paused.promise
      if (this.finished) return
      const replica = this.replica
      const query = `?after=${this.after}${this.status === undefined ? "" : `&status=${this.status}`}`
      const controller = new AbortController()
      const init = bearer(this.key, {
        accept: "text/event-stream",
        ...(this.last === undefined ? {} : { "last-event-id": this.last })
      })
      const opened = { replica, interruptions: run.interruptions[replica], generation: run.system.generation(replica) }
      const response = await run.system.fetch(replica, `/v1/pets/changes${query}`, {
        ...init,
        signal: controller.signal
      }).catch(() => undefined)
      if (response === undefined) {
        await sleep(50)
        continue
      }
      if (response.status !== 200) {
        await response.arrayBuffer().catch(() => undefined)
        if (response.status === 401) {
          if (!this.revoked()) run.violation(`${this.label}: a reconnect was refused 401 with its key not revoked`)
          this.done = true
        } else if (response.status === 503 || response.status === 429) {
          this.replica = (replica + 1) % run.system.replicas
          await sleep(100)
        } else {
          run.violation(`${this.label}: a reconnect was answered ${response.status}`)
          this.done = true
        }
        continue
      }
      if (this.last === undefined && this.after === "now") this.hi = positionOf(await run.end())
      const reader = readEvents(response)
      this.answered()
      let cutHere = false
      this.cut = () => {
        cutHere = true
        controller.abort()
        reader.cancel().catch(() => undefined)
      }
      // Stopped while it connected (its `now` resolved meanwhile): nobody else cuts a stream that never ends.
      if (this.finished) this.cut()
      this.openedAt = opened
      let terminal: Block | undefined
      let failed = false
      try {
        for (;;) {
          // A client that has stopped reading still notices its connection closing.
          if (this.paused !== undefined) await Promise.race([this.paused.promise, reader.closed])
          const block = await reader.next(3_600_000)
          if (block === undefined) break
          if (block.event === "error" || block.event === "reset") terminal = block
          else if (block.id !== undefined) {
            this.last = block.id
            if (block.event === "created") {
              this.deliver(positionOf(block.id), JSON.parse(block.data!))
              if (this.slow) await sleep(2)
            }
          }
        }
      } catch {
        failed = !cutHere
      }
      this.cut = undefined
      this.openedAt = undefined
      if (cutHere || this.finished) continue
      // A drain or restart began since it opened, or its server was draining already (and ends it at once).
      const interrupted = run.interruptions[replica] > opened.interruptions || run.draining.has(replica) ||
        run.system.generation(replica) > opened.generation
      const code = terminal?.data === undefined ? terminal?.event : JSON.parse(terminal.data).code
      if (code === "unauthorized") {
        if (!this.revoked()) run.violation(`${this.label}: ended unauthorized with its key not revoked`)
        this.done = true
      } else if (code === "slow_consumer") {
        if (!this.wasPaused && !this.slow) {
          run.violation(`${this.label}: slow_consumer to a client that reads as fast as it can (at ${this.last})`)
        }
      } else if (code !== undefined) {
        run.violation(`${this.label}: ended with ${terminal!.event} ${code} (last id ${this.last})`)
        if (code === "feed_position_gone") this.done = true
      } else if (!interrupted) {
        run.violation(`${this.label}: ${failed ? "failed" : "ended"} with no event, no drain and no restart`)
      }
      if (!this.done) await sleep(20)
    }
  }
}

interface Page {
  readonly changes: ReadonlyArray<{ readonly position: string; readonly pet: Delivered["pet"] }>
  readonly next: string
}

/** A long poll from `next` to `next`, as the documented loop runs it. */
class PollFollower extends Follower {
  readonly grace = POLL_GRACE_MS
  next: string | undefined
  readonly controller = new AbortController()
  constructor(
    run: Run,
    index: number,
    key: string,
    status: Status | undefined,
    after: string,
    replica: number,
    readonly limit: number
  ) {
    super(run, index, key, status, after, replica)
  }
  get label() {
    return `poll ${this.index} (limit=${this.limit}, after=${this.after}, status=${this.status})`
  }
  reached() {
    return this.next === undefined ? this.lo : positionOf(this.next)
  }
  stop() {
    this.finished = true
    this.controller.abort()
  }
  start() {
    this.looping = this.loop()
  }
  private async loop() {
    const { run } = this
    while (!this.done && !this.finished) {
      const replica = this.replica
      const query = `after=${this.next ?? this.after}&wait=${POLL_WAIT_SECONDS}&limit=${this.limit}` +
        (this.status === undefined ? "" : `&status=${this.status}`)
      const timeout = AbortSignal.timeout(POLL_WAIT_SECONDS * 1_000 + POLL_MARGIN_MS)
      const response = await run.system.fetch(replica, `/v1/pets/changes?${query}`, {
        ...bearer(this.key),
        signal: AbortSignal.any([this.controller.signal, timeout])
      }).catch(() => undefined)
      const body = response?.status === 200
        ? await response.json().then((page) => page as Page, () => undefined)
        : undefined
      if (response !== undefined && body === undefined) await response.arrayBuffer().catch(() => undefined)
      if (this.finished) return
      if (timeout.aborted) {
        run.violation(`${this.label}: a poll (${query}) did not answer within its wait and ${POLL_MARGIN_MS} ms`)
      }
      if (response === undefined || response.status === 503 || (response.status === 200 && body === undefined)) {
        this.replica = (replica + 1) % run.system.replicas
        await sleep(50)
        continue
      }
      if (body !== undefined) {
        if (this.next === undefined && this.after === "now") this.hi = positionOf(await run.end())
        for (const change of body.changes) this.deliver(positionOf(change.position), change.pet)
        this.next = body.next
        continue
      }
      if (response.status !== 401 || !this.revoked()) {
        run.violation(`${this.label}: a poll (${query}) was answered ${response.status}`)
      }
      this.done = true
    }
  }
}

/** What the commands' preconditions look at. */
interface Model {
  followers: number
  streams: Array<number>
  revoked: Set<number>
}

export type Command = fc.AsyncCommand<Model, Run>

const command = (
  label: string,
  run: (real: Run, model: Model) => Promise<void>,
  check: (model: Model) => boolean = () => true
): Command => ({
  check,
  run: async (model, real) => {
    trace(`${label}…`)
    await run(real, model)
    trace(`${label} done`)
  },
  toString: () => label
})

/** MODEL_TRACE names a file that gets each command as it starts and ends, to see where a run hangs. */
const trace = (line: string) => {
  if (process.env.MODEL_TRACE !== undefined) {
    appendFileSync(process.env.MODEL_TRACE, `${new Date().toISOString()} ${line}\n`)
  }
}

/** The start of a new follower: a position and the bounds the checks hold it to. */
const startAt = async (run: Run, from: From, pick: number) => {
  if (from === "start") return { after: "start", lo: 0, hi: 0 }
  if (from === "now") return { after: "now", lo: 0, hi: 0 }
  const position = from === "list" || run.listed.length === 0 ? await run.end() : run.listed[pick % run.listed.length]
  run.listed.push(position)
  return { after: position, lo: positionOf(position), hi: positionOf(position) }
}

const follow = async (run: Run, follower: Follower, bounds: { readonly lo: number; readonly hi: number }) => {
  follower.lo = bounds.lo
  follower.hi = bounds.hi
  run.followers.push(follower)
  if (follower.after === "now" && follower instanceof PollFollower) follower.lo = positionOf(await run.end())
  ;(follower as StreamFollower | PollFollower).start()
}

const create = async (run: Run, replica: number, status: Status, idempotencyKey?: string) => {
  const name = run.name("pet ")
  const body = JSON.stringify({ name, categoryId: 1, status })
  const sentAt = Date.now()
  const headers = {
    "content-type": "application/json",
    ...(idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey })
  }
  const response = await run.system.fetch(replica, "/v1/pets", {
    method: "POST",
    ...bearer(run.system.keys[0], headers),
    body
  })
    .catch(() => undefined)
  if (response?.status === 201) {
    const pet = await response.json() as { readonly id: number }
    run.acknowledged.set(pet.id, { sentAt })
    if (idempotencyKey !== undefined) run.idempotencyKeys.push({ key: idempotencyKey, body })
  } else await response?.arrayBuffer().catch(() => undefined)
  run.sent.set(name, sentAt)
}

/** Each command of the model, by name: what a regression test replays, and what the search draws. */
export const Commands = {
  create: (r: number, s: Status) => command(`create ${s} on ${r}`, (run) => create(run, r, s)),
  createKeyed: (r: number, s: Status, again: boolean) =>
    command(`create ${s} on ${r} with an Idempotency-Key${again ? ", replayed" : ""}`, async (run) => {
      const previous = run.idempotencyKeys.at(-1)
      if (again && previous !== undefined) {
        const response = await run.system.fetch(r, "/v1/pets", {
          method: "POST",
          ...bearer(run.system.keys[0], { "content-type": "application/json", "idempotency-key": previous.key }),
          body: previous.body
        }).catch(() => undefined)
        await response?.arrayBuffer().catch(() => undefined)
      } else await create(run, r, s, run.name("key-"))
    }),
  rolledBack: (r: number, s: Status) =>
    command(`create ${s} on ${r} in a transaction that rolls back`, async (run) => {
      const name = run.name("rolled back ")
      run.rolledBackNames.add(name)
      await run.system.rolledBack(r, { name, status: s })
    }),
  burst: (n: number, r: number) =>
    command(`create ${n} at once from ${r}`, async (run) => {
      const pending = new Set<Promise<void>>()
      for (let i = 0; i < n; i++) {
        const one: Promise<void> = create(run, (r + i) % run.system.replicas, STATUSES[i % 3]).then(() => {
          pending.delete(one)
        })
        pending.add(one)
        if (pending.size >= 16) await Promise.race(pending)
      }
      await Promise.all(pending)
    }),
  stream: (k: number, s: Status | undefined, f: From, r: number, slow: boolean, pick = 0) =>
    command(`open a ${slow ? "slow" : "fast"} stream of key ${k} after ${f}, status ${s}, on ${r}`, async (run, m) => {
      const bounds = await startAt(run, f, pick)
      const follower = new StreamFollower(run, m.followers, run.system.keys[k], s, bounds.after, r, slow)
      m.streams.push(m.followers++)
      await follow(run, follower, bounds)
      await follower.connected
    }, (m) => !m.revoked.has(k) && m.followers < MAX_FOLLOWERS),
  poll: (k: number, s: Status | undefined, f: From, r: number, limit: number, pick = 0) =>
    command(`open a poll of key ${k} after ${f}, status ${s}, limit ${limit}, on ${r}`, async (run, m) => {
      const bounds = await startAt(run, f, pick)
      const follower = new PollFollower(run, m.followers++, run.system.keys[k], s, bounds.after, r, limit)
      await follow(run, follower, bounds)
    }, (m) => !m.revoked.has(k) && m.followers < MAX_FOLLOWERS),
  reconnect: (i: number, r: number) =>
    command(`cut stream #${i} and reconnect with Last-Event-ID on ${r}`, async (run, m) => {
      const follower = run.followers[m.streams[i % m.streams.length]] as StreamFollower
      follower.replica = r
      follower.cut?.()
    }, (m) => m.streams.length > 0),
  pause: (i: number, stopped: boolean) =>
    command(`${stopped ? "stop" : "resume"} reading stream #${i}`, async (run, m) => {
      const follower = run.followers[m.streams[i % m.streams.length]] as StreamFollower
      if (stopped) follower.pause()
      else follower.resume()
    }, (m) => m.streams.length > 0),
  revoke: (k: number, r: number) =>
    command(`revoke key ${k} on ${r}`, async (run, m) => {
      m.revoked.add(k)
      run.revoking.add(run.system.keys[k])
      await run.system.revoke(r, run.system.keys[k])
      run.revokedAt.set(run.system.keys[k], Date.now())
    }, (m) => !m.revoked.has(k)),
  drain: (r: number) =>
    command(`drain ${r} and serve again`, async (run) => {
      run.interruptions[r]++
      run.draining.add(r)
      await run.system.drain(r).finally(() => run.draining.delete(r))
      await expectEnded(run, r, "the drain")
    }),
  restart: (r: number) =>
    command(`kill ${r} and start it again`, async (run) => {
      run.interruptions[r]++
      run.draining.add(r)
      await run.system.restart!(r).finally(() => run.draining.delete(r))
      await expectEnded(run, r, "the restart")
    }),
  wait: (ms: number) => command(`wait ${ms} ms`, () => sleep(ms).then(() => {}))
}

const MAX_FOLLOWERS = 12

/** The commands the search draws, for a system of `replicas` servers. */
const feedCommands = (replicas: number, options: { readonly restarts: boolean; readonly keys: number }) => {
  const replica = fc.nat({ max: replicas - 1 })
  const status = fc.constantFrom(...STATUSES)
  const filter = fc.option(status, { nil: undefined, freq: 2 })
  const from = fc.constantFrom<From>("start", "now", "list", "past")
  const key = fc.nat({ max: options.keys - 1 })
  const opens = [
    fc.tuple(key, filter, from, replica, fc.boolean(), fc.nat()).map(([k, s, f, r, slow, pick]) =>
      Commands.stream(k, s, f, r, slow, pick)
    ),
    fc.tuple(key, filter, from, replica, fc.constantFrom(1, 7, 100), fc.nat()).map(([k, s, f, r, limit, pick]) =>
      Commands.poll(k, s, f, r, limit, pick)
    )
  ]
  const commands: Array<readonly [keyof typeof Commands, fc.Arbitrary<Command>]> = [
    ["stream", opens[0]],
    ["poll", opens[1]],
    ["stream", opens[0]],
    ["poll", opens[1]],
    ["create", fc.tuple(replica, status).map(([r, s]) => Commands.create(r, s))],
    ["create", fc.tuple(replica, status).map(([r, s]) => Commands.create(r, s))],
    ["createKeyed", fc.tuple(replica, status, fc.boolean()).map(([r, s, again]) => Commands.createKeyed(r, s, again))],
    ["rolledBack", fc.tuple(replica, status).map(([r, s]) => Commands.rolledBack(r, s))],
    ["burst", fc.tuple(fc.constantFrom(30, 30, 30, 150, 150, 1_100), replica).map(([n, r]) => Commands.burst(n, r))],
    ["reconnect", fc.tuple(fc.nat(), replica).map(([i, r]) => Commands.reconnect(i, r))],
    ["pause", fc.tuple(fc.nat(), fc.boolean()).map(([i, stopped]) => Commands.pause(i, stopped))],
    ["revoke", fc.tuple(fc.integer({ min: 1, max: options.keys - 1 }), replica).map(([k, r]) => Commands.revoke(k, r))],
    ["drain", replica.map((r) => Commands.drain(r))],
    ["wait", fc.constantFrom(100, 600).map((ms) => Commands.wait(ms))]
  ]
  if (options.restarts) commands.push(["restart", replica.map((r) => Commands.restart(r))])
  // MODEL_SKIP="drain,revoke": leaves those commands out, to look past a case already found.
  const skipped = (process.env.MODEL_SKIP ?? "").split(",")
  const drawn = commands.filter(([name]) => !skipped.includes(name)).map(([, arbitrary]) => arbitrary)
  // Every run has a follower or two from its first command.
  return fc.tuple(
    fc.array(fc.oneof(...opens), { minLength: 1, maxLength: 2 }),
    fc.commands(drawn, { maxCommands: 14, size: "max" })
  )
    .map(([first, rest]) => ({
      *[Symbol.iterator]() {
        yield* first
        yield* rest
      },
      toString: () => [...first.map(String), String(rest)].join(",")
    }))
}

/**
 * Every stream a server of the replica served before it was drained (opened before the drain, or while it drained) has
 * ended; one that has not is cut, as its client would give up on it.
 */
const expectEnded = async (run: Run, replica: number, what: string) => {
  const deadline = Date.now() + 3_000
  const served = (follower: StreamFollower) =>
    follower.openedAt?.replica === replica && follower.openedAt.generation < run.system.generation(replica)
  for (const follower of run.followers) {
    if (!(follower instanceof StreamFollower)) continue
    while (served(follower) && Date.now() < deadline) await sleep(20)
    if (served(follower)) {
      const during = follower.openedAt!.interruptions === run.interruptions[replica]
      const when = during ? `opened on ${replica} while it drained` : `open on ${replica}`
      run.violation(`${follower.label}: ${when}, still open 3 s after ${what}`)
      follower.cut?.()
    }
  }
}

/** Lets every follower reach the end of the feed, stops them, and checks what each received. */
const finish = async (run: Run) => {
  trace("catching up")
  for (const follower of run.followers) if (follower instanceof StreamFollower) follower.resume()
  const revoking = Math.max(0, ...run.revokedAt.values())
  const committed = await run.system.committed()
  const end = committed.at(-1)?.position ?? 0
  const deadline = Date.now() + CATCH_UP_MS
  for (const follower of run.followers) {
    while (!follower.done && follower.reached() < end && Date.now() < deadline) await sleep(20)
    if (!follower.done && follower.reached() < end) {
      run.violation(`${follower.label}: at ${follower.reached()} of ${end} ${CATCH_UP_MS} ms after the last command`)
    }
  }
  // A revoked key's stream ends within its grace.
  await sleep(Math.max(0, revoking + STREAM_GRACE_MS + 500 - Date.now()))
  for (const follower of run.followers) {
    if (follower.revoked() && follower instanceof StreamFollower && !follower.done) {
      run.violation(`${follower.label}: still open ${STREAM_GRACE_MS + 500} ms after its key's revocation`)
    }
    follower.stop()
  }
  await Promise.all(run.followers.map((follower) => follower.looping))
  checkRun(run, committed)
}

/** The invariants, against the database's commit order. */
export const checkRun = (run: Run, committed: ReadonlyArray<Committed>) => {
  const byId = new Map(committed.map((pet) => [pet.id, pet]))
  for (const id of run.acknowledged.keys()) if (!byId.has(id)) run.violation(`pet ${id} acknowledged, not committed`)
  for (const pet of committed) if (run.rolledBackNames.has(pet.name)) run.violation(`rolled back ${pet.name} committed`)
  for (const follower of run.followers) {
    const label = follower.label
    const expected = committed.filter((pet) =>
      pet.position > follower.lo && (follower.status === undefined || pet.status === follower.status)
    )
    const got = follower.received
    const first = got.length === 0 ? expected.length : expected.findIndex((pet) => pet.position === got[0].position)
    // A revoked key's follower may have been refused before anything came.
    const missed = got.length === 0 && follower.revoked()
      ? undefined
      : expected.slice(0, Math.max(first, 0)).find((pet) => pet.position > follower.hi)
    if (missed !== undefined) run.violation(`${label}: pet at ${missed.position} never came (it started before)`)
    let broken = false
    for (const [i, change] of got.entries()) {
      const want = expected[first + i]
      if (run.rolledBackNames.has(change.pet.name)) run.violation(`${label}: got the rolled-back ${change.pet.name}`)
      if (want === undefined || first === -1 || want.position !== change.position) {
        const where = got.slice(Math.max(0, i - 1), i + 2).map((c) => c.position)
        run.violation(
          `${label}: change ${i} at ${change.position} where ${want?.position ?? "none"} was due (around: ${where})`
        )
        broken = true
        break
      }
      const { id, name, status } = want
      if (change.pet.id !== id || change.pet.name !== name || change.pet.status !== status) {
        run.violation(`${label}: at ${change.position} ${JSON.stringify(change.pet)}, the database has ${name}`)
      }
      const revokedAt = run.revokedAt.get(follower.key)
      const sentAt = run.sent.get(name)
      if (revokedAt !== undefined && sentAt !== undefined && sentAt > revokedAt + follower.grace) {
        run.violation(`${label}: got ${name}, created ${sentAt - revokedAt} ms after its key's revocation`)
      }
    }
    if (!broken && !follower.revoked() && first !== -1 && first + got.length < expected.length) {
      run.violation(`${label}: ${expected.length - first - got.length} pets at the end never came`)
    }
  }
}

type MakeSystem = () => Promise<FeedSystem & { readonly close: () => Promise<void> }>

/** Runs the commands on a fresh system, lets the followers catch up, and fails with what broke. */
export const runCommands = async (make: MakeSystem, commands: Iterable<Command>) => {
  trace(`run: ${commands}`)
  const started = Date.now()
  const system = await make()
  const made = Date.now()
  const run = new Run(system)
  try {
    await fc.asyncModelRun(
      () => ({ model: { followers: 0, streams: [], revoked: new Set<number>() }, real: run }),
      commands
    )
    await finish(run)
    if (process.env.MODEL_VERBOSE !== undefined) {
      const followers = run.followers.map((f) => `${f.label}: ${f.received.length}${f.done ? " (ended)" : ""}`)
      const times = `made in ${made - started} ms, run in ${Date.now() - made} ms`
      appendFileSync(process.env.MODEL_VERBOSE, [times, `${commands}`, ...followers, ...run.violations, ""].join("\n"))
    }
  } finally {
    for (const follower of run.followers) follower.stop()
    await system.close()
  }
  if (run.violations.length > 0) throw new Error(`the feed broke its promises:\n${run.violations.join("\n")}`)
}

/**
 * Searches: `numRuns` sequences of commands (`MODEL_RUNS` sets more), each on a fresh system made by `make`; a failing
 * sequence is reported with its commands and what broke (shrunk when `MODEL_SHRINK` is set: each step is slow).
 */
export const runFeedModel = (options: {
  readonly make: MakeSystem
  readonly replicas: number
  readonly keys: number
  readonly restarts?: boolean
  readonly numRuns: number
}) => {
  // The fixed runs search one fixed sequence, so that a run of the suites is the same run each time;
  // `MODEL_SEED=random` (or any other seed) searches elsewhere. The seed is said before the search starts (on the
  // console and in MODEL_TRACE), so that a run that hangs or is killed can be replayed.
  const seed = process.env.MODEL_SEED === "random" ?
    Math.floor(Math.random() * 2 ** 32) - 2 ** 31 :
    Number(process.env.MODEL_SEED ?? 1)
  if (process.env.MODEL_SEED !== undefined) console.log(`the feed's model searches from MODEL_SEED=${seed}`)
  trace(`MODEL_SEED=${seed} MODEL_RUNS=${process.env.MODEL_RUNS ?? options.numRuns}`)
  return fc.assert(
    fc.asyncProperty(
      feedCommands(options.replicas, { restarts: options.restarts ?? false, keys: options.keys }),
      (commands) => runCommands(options.make, commands)
    ),
    {
      numRuns: Number(process.env.MODEL_RUNS ?? options.numRuns),
      endOnFailure: process.env.MODEL_SHRINK === undefined,
      seed,
      // MODEL_PATH="3" runs only the fourth sequence of the seed: one that hung, replayed alone.
      ...(process.env.MODEL_PATH === undefined ? {} : { path: process.env.MODEL_PATH })
    }
  )
}
