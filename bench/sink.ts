/**
 * An OTLP/HTTP sink for the bench: takes every POST (spans, metrics) and answers 200, as a collector would, counting
 * requests and bytes; prints the counts to stderr when stopped. A process of its own, so that it answers while the
 * bench waits on wrk.
 */
let requests = 0
let bytes = 0
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: Number(process.env.PORT ?? 0),
  fetch: async (request) => {
    requests++
    bytes += (await request.arrayBuffer()).byteLength
    return new Response(null, { status: 200 })
  }
})
console.log(server.port)
process.on("SIGTERM", () => {
  console.error(`[sink] ${requests} exports, ${Math.round(bytes / 1024)} KiB`)
  process.exit(0)
})
