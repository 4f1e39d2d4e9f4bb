/**
 * `bun bench/runtime.ts [DIR …]`: what the Effect runtime alone costs a read, for the `effect` package installed under
 * each DIR (default: this project), alternated in rounds. The program has the shape of a get one as the engine runs
 * it — one fiber forked per request with the request in its context; the bearer middleware (a service looked up, the
 * key checked in a suspended effect, a failure caught, a header added, the key provided); the handler as `Effect.gen`
 * (the key read, the repository's statement, the deprecation headers); the answer made in `matchCauseEffect` — with no
 * I/O, no Schema and no HTTP, so the figure is the runtime's own. To compare with Effect 4:
 *
 *     npm i --prefix /tmp/effect4 effect@4.1.0 && bun bench/runtime.ts . /tmp/effect4
 */
import { resolve } from "node:path"

interface EffectModules {
  readonly version: string
  readonly Effect: any
  readonly Context: any
}

const load = async (dir: string): Promise<EffectModules> => {
  const entry = Bun.resolveSync("effect", resolve(dir))
  const effect = await import(entry)
  const { version } = await import(Bun.resolveSync("effect/package.json", resolve(dir)))
  return { version, Effect: effect.Effect, Context: effect.Context }
}

/** The get one's effect, written with what both major versions of `effect` name alike (tags made either way). */
const getOne = ({ Context, Effect }: EffectModules) => {
  const tag = (key: string) => Context.GenericTag !== undefined ? Context.GenericTag(key) : Context.Service(key)
  const catchAll = Effect.catchAll ?? Effect.catch
  const Request = tag("Request")
  const ApiKey = tag("ApiKey")
  const headers: Record<string, string> = {}
  const addHeaders = (added: Record<string, string>) => Effect.sync(() => void Object.assign(headers, added))
  const orUnavailable = (effect: unknown) => catchAll(effect, (error: unknown) => Effect.fail(error))
  const authenticate = (token: string) =>
    Effect.suspend(() => Effect.succeed(token.length > 7 ? { id: "k" } : undefined))
  const middleware = (inner: unknown) =>
    Effect.flatMap(
      Effect.flatMap(Effect.serviceOption(Request), () => orUnavailable(authenticate("Bearer key"))),
      (key: unknown) =>
        key === undefined
          ? Effect.fail("unauthorized")
          : Effect.flatMap(Effect.as(addHeaders({}), key), (key: unknown) => Effect.provideService(inner, ApiKey, key))
    )
  const statement = (id: number) => Effect.sync(() => ({ id, name: "Rex", categoryId: 1, status: "available" }))
  const handler = Effect.gen(function*() {
    yield* ApiKey
    const pet = yield* orUnavailable(statement(5000))
    yield* addHeaders({ deprecation: "@1767225600" })
    return pet
  })
  const answered = Effect.matchCauseEffect(middleware(handler), {
    onSuccess: (pet: unknown) => Effect.succeed(JSON.stringify(pet)),
    onFailure: () => Effect.succeed("{}")
  })
  return Effect.provideService(answered, Request, { url: "/v1/pets/5000" })
}

const N = 200_000
const ROUNDS = 5

const cpuPerRequest = (modules: EffectModules, program: unknown): number => {
  for (let i = 0; i < N / 10; i++) modules.Effect.runFork(program)
  const start = process.cpuUsage()
  for (let i = 0; i < N; i++) modules.Effect.runFork(program)
  const used = process.cpuUsage(start)
  return (used.user + used.system) / N
}

const subjects = await Promise.all((process.argv.length > 2 ? process.argv.slice(2) : ["."]).map(load))
const programs = subjects.map(getOne)
for (const [i, modules] of subjects.entries()) {
  if (
    modules.Effect.runSync(programs[i]) !== "{\"id\":5000,\"name\":\"Rex\",\"categoryId\":1,\"status\":\"available\"}"
  ) {
    throw new Error(`effect ${modules.version}: the program does not answer the pet`)
  }
}
const runs = subjects.map(() => [] as Array<number>)
for (let round = 0; round < ROUNDS; round++) {
  const order = subjects.map((_, i) => i)
  if (round % 2 === 1) order.reverse()
  for (const i of order) runs[i].push(cpuPerRequest(subjects[i], programs[i]))
}
console.log("| effect | CPU µs per request (median of rounds) |\n|---|---|")
for (const [i, modules] of subjects.entries()) {
  const sorted = [...runs[i]].sort((a, b) => a - b)
  console.log(`| ${modules.version} | ${sorted[Math.floor(sorted.length / 2)].toFixed(2)} |`)
}
