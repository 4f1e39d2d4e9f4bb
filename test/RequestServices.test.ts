import { describe, expect, it } from "@effect/vitest"
import { Context, Effect } from "effect"
import { RequestServices } from "../src/Serving/RequestServices.js"

class Shared extends Context.Tag("test/Shared")<Shared, string>() {}
class Own extends Context.Tag("test/Own")<Own, string>() {}

const shared = new Map<string, unknown>([[Shared.key, "shared"], ["test/Overridden", "shared"]])

describe("RequestServices", () => {
  it("reads the request's own services over the shared ones, which it leaves untouched", () => {
    const services = new RequestServices(shared)
    services.set(Own.key, "own")
    services.set("test/Overridden", "own")
    expect(services.get(Shared.key)).toBe("shared")
    expect(services.get(Own.key)).toBe("own")
    expect(services.get("test/Overridden")).toBe("own")
    expect(services.has(Shared.key) && services.has(Own.key) && !services.has("test/Missing")).toBe(true)
    expect(shared.has(Own.key)).toBe(false)
    expect(shared.get("test/Overridden")).toBe("shared")
  })

  it("is one map to whatever iterates or copies it (each key once)", () => {
    const services = new RequestServices(shared)
    services.set(Own.key, "own")
    services.set("test/Overridden", "own")
    const expected = { [Shared.key]: "shared", "test/Overridden": "own", [Own.key]: "own" }
    expect(services.size).toBe(3)
    expect(Object.fromEntries(services)).toEqual(expected)
    expect(Object.fromEntries(new Map(services))).toEqual(expected)
    expect(Object.fromEntries([...services.keys()].map((key, i) => [key, [...services.values()][i]]))).toEqual(expected)
    const seen: Record<string, unknown> = {}
    services.forEach((value, key) => (seen[key] = value))
    expect(seen).toEqual(expected)
  })

  it.effect("serves as the context of a fiber, through Effect's own reading and copying", () =>
    Effect.gen(function*() {
      const services = new RequestServices(shared)
      services.set(Own.key, "own")
      const context = Context.unsafeMake<Shared | Own>(services)
      const read = yield* Effect.all([Shared, Own]).pipe(Effect.provide(context))
      expect(read).toEqual(["shared", "own"])
      class Added extends Context.Tag("test/Added")<Added, number>() {}
      const added = Context.add(context, Added, 1)
      expect([Context.get(added, Shared), Context.get(added, Own), Context.get(added, Added)]).toEqual([
        "shared",
        "own",
        1
      ])
    }))
})
