/**
 * Effects that may already be done (`src/Immediate.ts`): the combinators keep an `Exit` one and compose anything else
 * as Effect does; in a call at once, a statement runs when its effect is made and the headers that follow its success
 * land in the request's answer at once, while outside one the same code makes ordinary effects, run each time they are
 * run.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Context, Effect, Exit } from "effect"
import {
  callAtOnce,
  contextWithEffectNow,
  flatMapExitNow,
  flatMapNow,
  mapNow,
  matchNow,
  serviceNow,
  tryNow
} from "../src/Immediate.js"
import {
  addResponseHeaders,
  type Answer,
  AnswerHeaders,
  answerWith,
  tapAnswerHeaders,
  tapResponseHeaders
} from "../src/ResponseHeaders.js"

describe("effects that may already be done", () => {
  it.effect("stay done when they are, and compose as usual when they are not", () =>
    Effect.gen(function*() {
      const done = flatMapNow(Exit.succeed(1), (n) => Exit.succeed(n + 1))
      expect(Exit.isExit(done)).toBe(true)
      expect(yield* done).toBe(2)
      const later = flatMapNow(Effect.sync(() => 1), (n) => Exit.succeed(n + 1))
      expect(Exit.isExit(later)).toBe(false)
      expect(yield* later).toBe(2)
      const piped = Exit.succeed(2).pipe(flatMapNow((n) => Exit.succeed(n * 10)), mapNow((n) => `${n}`))
      expect(Exit.isExit(piped)).toBe(true)
      expect(yield* piped).toBe("20")
      const failed = mapNow(Exit.fail("no"), () => "never")
      expect(yield* Effect.flip(failed)).toBe("no")

      const recovered = matchNow(Exit.fail("no"), { onFailure: (e) => Exit.succeed(`${e}!`), onSuccess: Exit.succeed })
      expect(Exit.isExit(recovered)).toBe(true)
      expect(yield* recovered).toBe("no!")
      const defect = matchNow(Exit.die("boom"), { onFailure: () => Exit.succeed("handled"), onSuccess: Exit.succeed })
      expect(yield* Effect.exit(defect)).toEqual(Exit.die("boom"))
      const failedLater = matchNow(Effect.suspend(() => Effect.fail("no")), {
        onFailure: (e) => Exit.succeed(`${e}?`),
        onSuccess: Exit.succeed
      })
      expect(yield* failedLater).toBe("no?")
      const outcome = flatMapExitNow(Exit.die("boom"), (exit) => Exit.succeed(exit))
      expect(Exit.isExit(outcome)).toBe(true)
      expect(yield* outcome).toEqual(Exit.die("boom"))
      const outcomeLater = flatMapExitNow(Effect.suspend(() => Effect.fail("no")), (exit) => Exit.succeed(exit))
      expect(Exit.isExit(outcomeLater)).toBe(false)
      expect(yield* outcomeLater).toEqual(Exit.fail("no"))
    }))
})

describe("a call at once", () => {
  const requestContext = () => {
    const headers: Record<string, string> = {}
    return { headers, context: Context.make(AnswerHeaders, headers) as Context.Context<never> }
  }

  it.effect("runs a statement when its effect is made, and adds headers to the request's answer at once", () =>
    Effect.gen(function*() {
      const { context, headers } = requestContext()
      let runs = 0
      const outcome = callAtOnce(
        context,
        () =>
          tryNow({ try: () => ++runs, catch: String }).pipe(tapResponseHeaders((n) => ({ location: `/v1/pets/${n}` })))
      )
      expect(Exit.isExit(outcome)).toBe(true)
      expect(runs).toBe(1)
      expect(headers).toEqual({ location: "/v1/pets/1" })
      expect(yield* outcome).toBe(1)
      expect(runs).toBe(1)
      const failed = callAtOnce(context, () =>
        tryNow({
          try: () => {
            throw new Error("locked")
          },
          catch: (error) => `failed: ${(error as Error).message}`
        }))
      expect(failed).toEqual(Exit.fail("failed: locked"))
      // Headers follow their effect's success: none after a failure.
      const refused = callAtOnce(context, () => tapResponseHeaders(Exit.fail("no"), () => ({ link: "<never>" })))
      expect(refused).toEqual(Exit.fail("no"))
      expect(headers).toEqual({ location: "/v1/pets/1" })
    }))

  it.effect("outside one, the same code makes effects that run each time they are run", () =>
    Effect.gen(function*() {
      let runs = 0
      const statement = tryNow({ try: () => ++runs, catch: String })
      expect(Exit.isExit(statement)).toBe(false)
      expect(runs).toBe(0)
      expect(yield* statement).toBe(1)
      expect(yield* statement).toBe(2)
      const headers: Record<string, string> = {}
      const added = addResponseHeaders({ link: "<next>" })
      expect(headers).toEqual({})
      yield* Effect.provideService(added, AnswerHeaders, headers)
      expect(headers).toEqual({ link: "<next>" })
    }))

  it.live("leaves what cannot be done on the spot to a fiber, in the request's context, in its order", () =>
    Effect.gen(function*() {
      const { context, headers } = requestContext()
      const left = callAtOnce(context, () =>
        Effect.sleep("1 millis").pipe(
          Effect.zipRight(addResponseHeaders({ "retry-after": "1" })),
          Effect.zipRight(Exit.succeed(7)),
          tapResponseHeaders((n) => ({ "x-n": String(n) }))
        ))
      expect(Exit.isExit(left)).toBe(false)
      expect(headers).toEqual({})
      expect(yield* Effect.provide(left, context)).toBe(7)
      expect(headers).toEqual({ "retry-after": "1", "x-n": "7" })
    }))

  it.effect("finds a service of the request's context at once; outside one, the tag reads it when run", () =>
    Effect.gen(function*() {
      const { context, headers } = requestContext()
      expect(callAtOnce(context, () => serviceNow(AnswerHeaders))).toEqual(Exit.succeed(headers))
      const later = serviceNow(AnswerHeaders)
      expect(Exit.isExit(later)).toBe(false)
      expect(yield* Effect.provideService(later, AnswerHeaders, headers)).toBe(headers)
    }))

  it.effect("adds the headers of either outcome, at once when it is done, and keeps the whole cause", () =>
    Effect.gen(function*() {
      const headersOf = {
        onSuccess: (n: number) => n > 0 ? { location: `/v1/pets/${n}` } : undefined,
        onFailure: (e: string) => e === "busy" ? { "retry-after": "1" } : undefined
      }
      const created = requestContext()
      expect(callAtOnce(created.context, () => tapAnswerHeaders(Exit.succeed(5), headersOf))).toEqual(Exit.succeed(5))
      expect(created.headers).toEqual({ location: "/v1/pets/5" })
      const busy = requestContext()
      expect(callAtOnce(busy.context, () => tapAnswerHeaders(Exit.fail("busy"), headersOf))).toEqual(Exit.fail("busy"))
      expect(busy.headers).toEqual({ "retry-after": "1" })
      const neither = requestContext()
      callAtOnce(neither.context, () => tapAnswerHeaders(Exit.succeed(0), headersOf))
      callAtOnce(neither.context, () => tapAnswerHeaders(Exit.fail("gone"), headersOf))
      expect(neither.headers).toEqual({})
      const defect = requestContext()
      const died = callAtOnce(
        defect.context,
        () => tapAnswerHeaders(Exit.die("bug") as Exit.Exit<number, string>, headersOf)
      )
      expect(died).toEqual(Exit.die("bug"))
      expect(defect.headers).toEqual({})
      // Not done yet: composed, and the headers are added when it ends, in a fiber with the request's context.
      const waited = requestContext()
      const later = callAtOnce(
        waited.context,
        () => tapAnswerHeaders(Effect.zipRight(Effect.yieldNow(), Exit.fail("busy")), headersOf)
      )
      expect(Exit.isExit(later)).toBe(false)
      expect(yield* Effect.flip(Effect.provide(later, waited.context))).toBe("busy")
      expect(waited.headers).toEqual({ "retry-after": "1" })
      // A failure beside a defect (a finalizer's): the failure's headers, and the whole cause kept, done or not.
      const both = Cause.sequential(Cause.fail("busy"), Cause.die("finalizer"))
      const mixed = requestContext()
      const mixedNow = callAtOnce(mixed.context, () => tapAnswerHeaders(Exit.failCause(both), headersOf))
      expect(mixedNow).toEqual(Exit.failCause(both))
      expect(mixed.headers).toEqual({ "retry-after": "1" })
      const mixedLater = callAtOnce(
        mixed.context,
        () => tapResponseHeaders(Effect.zipRight(Effect.yieldNow(), Effect.failCause(both)), headersOf.onSuccess)
      )
      expect(yield* Effect.exit(Effect.provide(mixedLater, mixed.context))).toEqual(Exit.failCause(both))
    }))

  it.effect("answers with the outcome decided from another and its headers, in one step, at once when it is done", () =>
    Effect.gen(function*() {
      // A count found: 0 is refused, any other is answered as its double with a header naming it.
      const decide = (exit: Exit.Exit<number, string>): Answer<number, string> =>
        Exit.isFailure(exit)
          ? [exit, { "retry-after": "1" }]
          : exit.value === 0
          ? [Exit.fail("none"), undefined]
          : [Exit.succeed(exit.value * 2), { "x-n": String(exit.value) }]
      const found = requestContext()
      expect(callAtOnce(found.context, () => answerWith(Exit.succeed(3), decide))).toEqual(Exit.succeed(6))
      expect(found.headers).toEqual({ "x-n": "3" })
      const none = requestContext()
      expect(callAtOnce(none.context, () => answerWith(Exit.succeed(0), decide))).toEqual(Exit.fail("none"))
      expect(none.headers).toEqual({})
      const failed = requestContext()
      expect(callAtOnce(failed.context, () => answerWith(Exit.fail("busy"), decide))).toEqual(Exit.fail("busy"))
      expect(failed.headers).toEqual({ "retry-after": "1" })
      // Not done yet: decided when it ends, in a fiber with the request's context.
      const waited = requestContext()
      const later = callAtOnce(
        waited.context,
        () => answerWith(Effect.zipRight(Effect.yieldNow(), Exit.succeed(4)), decide)
      )
      expect(Exit.isExit(later)).toBe(false)
      expect(yield* Effect.provide(later, waited.context)).toBe(8)
      expect(waited.headers).toEqual({ "x-n": "4" })
    }))

  it("ends with its call: a defect thrown is its exit, and a call nested in it leaves it as it was", () => {
    const outer = requestContext()
    const inner = requestContext()
    const outcome = callAtOnce(outer.context, () => {
      const nested = callAtOnce(inner.context, () => {
        throw new Error("bug")
      })
      expect(Exit.isExit(nested) && Exit.isFailure(nested)).toBe(true)
      return contextWithEffectNow((context) => Exit.succeed(Context.unsafeGet(context, AnswerHeaders)))
    })
    expect(outcome).toEqual(Exit.succeed(outer.headers))
    expect(Exit.isExit(contextWithEffectNow(() => Exit.void))).toBe(false)
  })
})
