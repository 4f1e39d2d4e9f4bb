/**
 * Whether petstore and the raw program's peers answer as raw does: the benchmarked requests (list 20, the filtered
 * list with a deep cursor, get one, create), and the refusals around them (no key, invalid parameters and bodies, an
 * unknown id or path), each sent to every server; the status, the body byte for byte and every header but `Date` are
 * compared. `npm run bench` checks petstore and the peers with it before it loads them, on databases copied from the
 * same one (so that a create is given the same id everywhere): a difference on a benchmarked request stops it, one on
 * a refusal is reported.
 *
 *     bun bench/peers/check.ts KEY http://127.0.0.1:8081 http://127.0.0.1:8082 …   # the first is the reference
 */

interface Probe {
  readonly name: string
  readonly method?: string
  readonly path: string
  readonly body?: string
  readonly headers?: Record<string, string>
  /** Sent without the key. */
  readonly anonymous?: true
  /** One of the bench's loads: a peer must answer it as the reference does. */
  readonly benchmarked?: true
}

const CREATE = "{\"name\":\"  Bench Pet  \",\"categoryId\":7,\"status\":\"pending\"}"
const json = { "content-type": "application/json" }

/** The requests compared: `pets` is the catalogue's size, as in the bench's scenarios. */
const probes = (pets: number): ReadonlyArray<Probe> => [
  { name: "list 20", path: "/v1/pets", benchmarked: true },
  {
    name: "filtered list, deep cursor",
    path: `/v1/pets?status=pending&after=${Math.floor(pets * 0.9)}`,
    benchmarked: true
  },
  { name: "get one", path: `/v1/pets/${Math.ceil(pets / 2)}`, benchmarked: true },
  { name: "create", method: "POST", path: "/v1/pets", body: CREATE, headers: json, benchmarked: true },
  { name: "a request id of its own", path: "/v1/pets?limit=2", headers: { "x-request-id": "bench-check-1" } },
  { name: "a list with a next page", path: "/v1/pets?limit=5&status=sold&after=12" },
  { name: "a list's last page", path: `/v1/pets?status=available&after=${pets - 4}` },
  { name: "list without a key", path: "/v1/pets", anonymous: true },
  { name: "get one without a key", path: "/v1/pets/1", anonymous: true },
  { name: "create without a key", method: "POST", path: "/v1/pets", body: CREATE, headers: json, anonymous: true },
  { name: "a key of the wrong shape", path: "/v1/pets", headers: { authorization: "Bearer nope" } },
  { name: "limit 0", path: "/v1/pets?limit=0" },
  { name: "limit 101", path: "/v1/pets?limit=101" },
  { name: "limit 020", path: "/v1/pets?limit=020" },
  { name: "an unknown status", path: "/v1/pets?status=lost" },
  { name: "after beyond a safe integer", path: "/v1/pets?after=9007199254740993" },
  { name: "an id of 0", path: "/v1/pets/0" },
  { name: "an id that is not a number", path: "/v1/pets/abc" },
  { name: "an unknown id", path: `/v1/pets/${pets * 100}` },
  { name: "a body that is not JSON", method: "POST", path: "/v1/pets", body: "{", headers: json },
  { name: "a body that is an array", method: "POST", path: "/v1/pets", body: "[]", headers: json },
  {
    name: "a blank name",
    method: "POST",
    path: "/v1/pets",
    body: "{\"name\":\"   \",\"categoryId\":7}",
    headers: json
  },
  {
    name: "a category id in a string",
    method: "POST",
    path: "/v1/pets",
    body: "{\"name\":\"Rex\",\"categoryId\":\"7\"}",
    headers: json
  },
  {
    name: "an unknown status in a body",
    method: "POST",
    path: "/v1/pets",
    body: "{\"name\":\"Rex\",\"categoryId\":7,\"status\":\"lost\"}",
    headers: json
  },
  {
    name: "a body of another media type",
    method: "POST",
    path: "/v1/pets",
    body: CREATE,
    headers: { "content-type": "text/plain" }
  },
  { name: "a path served by nothing", path: "/v1/nothing" }
]

/** What an answer is compared by: its status, its body, and its headers but `Date` (and a request id made up). */
interface Answer {
  readonly status: number
  readonly body: string
  readonly headers: Record<string, string>
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

const ask = async (origin: string, key: string, probe: Probe): Promise<Answer> => {
  const response = await fetch(origin + probe.path, {
    method: probe.method ?? "GET",
    headers: { ...(probe.anonymous ? {} : { authorization: `Bearer ${key}` }), ...probe.headers },
    ...(probe.body === undefined ? {} : { body: probe.body })
  })
  const headers: Record<string, string> = {}
  response.headers.forEach((value, name) => {
    // A request id the server made up is only checked for its shape.
    if (name === "x-request-id" && probe.headers?.["x-request-id"] === undefined) {
      value = UUID.test(value) ? "<a UUIDv4>" : value
    }
    if (name !== "date") headers[name] = value
  })
  return { status: response.status, body: await response.text(), headers }
}

/** A way a server answers a probe otherwise than the reference: which server, and what differs (one line). */
export interface Difference {
  readonly server: string
  readonly text: string
}

/**
 * Each server's differences from the reference, on the benchmarked requests and on the others (none: it answers
 * alike). The probes run one at a time, on each server in turn, so that every server sees the same sequence (its
 * creates get the same ids).
 */
export const differences = async (
  reference: string,
  servers: ReadonlyArray<{ readonly name: string; readonly origin: string }>,
  key: string,
  pets: number
): Promise<{ readonly benchmarked: Array<Difference>; readonly others: Array<Difference> }> => {
  const benchmarked: Array<Difference> = []
  const others: Array<Difference> = []
  for (const probe of probes(pets)) {
    const expected = await ask(reference, key, probe)
    for (const server of servers) {
      const got = await ask(server.origin, key, probe)
      const differ = (what: string, want: unknown, have: unknown) =>
        (probe.benchmarked ? benchmarked : others).push({
          server: server.name,
          text: `${server.name}, ${probe.name}: ${what} ${JSON.stringify(have)}, not ${JSON.stringify(want)}`
        })
      if (got.status !== expected.status) differ("status", expected.status, got.status)
      if (got.body !== expected.body) differ("body", expected.body, got.body)
      for (const name of new Set([...Object.keys(expected.headers), ...Object.keys(got.headers)])) {
        if (got.headers[name] !== expected.headers[name]) {
          differ(`header ${name}`, expected.headers[name], got.headers[name])
        }
      }
    }
  }
  return { benchmarked, others }
}

if (import.meta.main) {
  const [key, reference, ...others] = process.argv.slice(2)
  const found = await differences(
    reference,
    others.map((origin) => ({ name: origin, origin })),
    key,
    Number(process.env.BENCH_PETS ?? 10_000)
  )
  for (const { text } of [...found.benchmarked, ...found.others]) console.log(text)
  console.log(
    `${found.benchmarked.length} differences on the benchmarked requests, ${found.others.length} on the others`
  )
  process.exit(found.benchmarked.length === 0 ? 0 : 1)
}
