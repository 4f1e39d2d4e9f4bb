/**
 * A web page follows the change feed in headless Chromium, as `docs/feed.md` gives it: the page, the Caddyfile and the
 * `EventSource` script are read from there, so that what the docs show is what runs. Once with `fetch` and the key,
 * the page served from a second loopback origin that `CORS_ORIGINS` names; once with `EventSource`, the page and the
 * feed served on one origin by the recipe's Caddy, which adds the key. Each time the page shows the pets there were,
 * petstore is stopped, pets are created while the page is cut off (by another server on the same database, on another
 * port), petstore starts again where it was, and the page, resuming with `Last-Event-ID`, shows each pet once, in
 * order.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { connect } from "node:net"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { skippedName } from "../support/skips.js"
import { NO_CHROMIUM, onPath, openPage, type Page } from "./support/chromium.js"
import { createKey, freePort, scratchDirectory, startPetstore, stopAll } from "./support/petstore.js"

const FEED_DOC = resolve(import.meta.dirname, "../../docs/feed.md")

/** The one code block of docs/feed.md fenced as `info`. */
const fenced = (info: string): string => {
  const blocks = [...readFileSync(FEED_DOC, "utf8").matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm)]
    .filter(([, language]) => language === info)
  if (blocks.length !== 1) throw new Error(`docs/feed.md has ${blocks.length} blocks of ${info}, not one`)
  return blocks[0][2]
}

/** `text` with `from` replaced by `to`, which it must hold exactly once. */
const replaceOnce = (text: string, from: string | RegExp, to: string) => {
  const found = text.split(from).length - 1
  if (found !== 1) throw new Error(`${from} is in the page ${found} times, not once`)
  return text.replace(from, to)
}

const NO_CADDY = onPath("caddy") === undefined
  ? "caddy not installed: apt-get install --no-install-recommends caddy (.ci/run does)"
  : undefined

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))

const cleanups: Array<() => unknown> = []
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
  await stopAll()
})

/** A catalogue on a SQLite file, its key, and the server serving it now. */
const catalogue = async (env: Record<string, string> = {}) => {
  const database = join(scratchDirectory(), "petstore.db")
  const { key } = createKey(database)
  /** `names`: what the page must show, in order: every pet created, once. */
  const state = { server: await startPetstore({ database, env }), names: [] as Array<string> }
  const create = async (origin: string, count: number) => {
    for (let i = 0; i < count; i++) {
      const name = `Pet ${state.names.length + 1}`
      const response = await fetch(`${origin}/v1/pets`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ name, categoryId: 1 })
      })
      const text = await response.text()
      expect(response.status, text).toBe(201)
      // What the page shows of it.
      state.names.push(`${name} #${JSON.parse(text).id}`)
    }
  }
  return {
    key,
    state,
    /** Pets created through the server serving now. */
    create: (count: number) => create(state.server.origin, count),
    /**
     * Stops the server (SIGTERM: the drain ends every stream), creates pets through another server on the same
     * database while none answers on the followed port, then starts the server again on its port.
     */
    restartWithPetsMissed: async (count: number) => {
      const { port } = state.server
      expect((await state.server.kill("SIGTERM")).code).toBe(0)
      const other = await startPetstore({ database, env })
      await create(other.origin, count)
      expect((await other.kill("SIGTERM")).code).toBe(0)
      state.server = await startPetstore({ database, env, port })
    }
  }
}

/** The list the page shows, once it has `count` items (or what it has after 20 s). */
const shown = async (page: Page, count: number) => {
  const deadline = Date.now() + 20_000
  for (;;) {
    const items = await page.evaluate<Array<string>>(
      `[...document.querySelectorAll("#pets li")].map((item) => item.textContent)`
    )
    if (items.length >= count || Date.now() > deadline) return items
    await sleep(100)
  }
}

/** The page shows exactly `expected` (a failure says what the page logged). */
const expectShown = async (page: Page, expected: ReadonlyArray<string>) =>
  expect(await shown(page, expected.length), page.log()).toEqual(expected)

/** The page, served on this loopback port. */
const servePage = (html: string, port: number) => {
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port,
    fetch: () => new Response(html, { headers: { "content-type": "text/html; charset=utf-8" } })
  })
  cleanups.push(() => server.stop(true))
  return `http://127.0.0.1:${server.port}`
}

const browse = async (url: string) => {
  const page = await openPage(url)
  cleanups.push(page.close)
  return page
}

const listening = async (port: number, output: () => string) => {
  const deadline = Date.now() + 10_000
  while (Date.now() < deadline) {
    const open = await new Promise<boolean>((done) => {
      const socket = connect(port, "127.0.0.1")
      socket.once("connect", () => (socket.destroy(), done(true)))
      socket.once("error", () => done(false))
    })
    if (open) return
    await sleep(50)
  }
  throw new Error(`caddy is not listening on ${port} after 10 s:\n${output()}`)
}

/**
 * The recipe's Caddyfile, with the global options a test needs (no admin endpoint, no certificates: loopback only),
 * serving `pageRoot` and the feed of `upstream`, with `key`.
 */
const startCaddy = async (options: { readonly upstream: string; readonly key: string; readonly pageRoot: string }) => {
  const directory = mkdtempSync(join(tmpdir(), "petstore-caddy-"))
  const port = await freePort()
  const config = join(directory, "Caddyfile")
  writeFileSync(config, `{\n\tadmin off\n\tauto_https off\n}\n\n${fenced("caddyfile")}`)
  let output = ""
  const child: ChildProcess = spawn("caddy", ["run", "--adapter", "caddyfile", "--config", config], {
    env: {
      PATH: process.env.PATH ?? "",
      HOME: directory,
      XDG_CONFIG_HOME: directory,
      XDG_DATA_HOME: directory,
      SITE_ADDRESS: `http://127.0.0.1:${port}`,
      PETSTORE_UPSTREAM: options.upstream,
      PETSTORE_KEY: options.key,
      PAGE_ROOT: options.pageRoot
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const exited = new Promise<void>((done) => child.once("exit", () => done()))
  child.stdout!.on("data", (chunk) => output += chunk)
  child.stderr!.on("data", (chunk) => output += chunk)
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, "SIGKILL")
    await exited
    rmSync(directory, { recursive: true, force: true })
  })
  await listening(port, () => output)
  return `http://127.0.0.1:${port}`
}

const describeIf = (name: string, reason: string | undefined, suite: () => void) =>
  reason === undefined ? describe(name, suite) : describe.skip(skippedName(name, reason), suite)

describeIf("a web page on another origin follows the feed with fetch", NO_CHROMIUM, () => {
  it("shows every pet once, across a restart, resuming with Last-Event-ID", async () => {
    const pageOrigin = `http://127.0.0.1:${await freePort()}`
    const pets = await catalogue({ CORS_ORIGINS: pageOrigin })
    let html = replaceOnce(fenced("html"), /const API = ".*"/, `const API = "${pets.state.server.origin}"`)
    html = replaceOnce(html, /const KEY = ".*"/, `const KEY = "${pets.key}"`)
    const page = await browse(servePage(html, Number(new URL(pageOrigin).port)))
    await pets.create(3)
    await expectShown(page, pets.state.names)
    await pets.restartWithPetsMissed(3)
    await pets.create(2)
    await expectShown(page, pets.state.names)
  })
})

describeIf("a web page follows the feed with EventSource through the Caddy recipe", NO_CHROMIUM ?? NO_CADDY, () => {
  it("shows every pet once, across a restart, resuming with Last-Event-ID", async () => {
    const pets = await catalogue()
    await pets.create(2)
    const pageRoot = mkdtempSync(join(tmpdir(), "petstore-page-"))
    cleanups.push(() => rmSync(pageRoot, { recursive: true, force: true }))
    // The fetch page without its API and KEY, its loop from `let last` the EventSource one, as docs/feed.md says.
    let html = replaceOnce(fenced("html"), /let last = [\s\S]*(?=<\/script>)/, fenced("js"))
    html = replaceOnce(replaceOnce(html, /^const API = .*\n/m, ""), /^const KEY = .*\n/m, "")
    writeFileSync(join(pageRoot, "index.html"), html)
    const site = await startCaddy({ upstream: new URL(pets.state.server.origin).host, key: pets.key, pageRoot })
    // The proxy passes on the feed alone: the rest of the API is not reached with its key.
    const create = await fetch(`${site}/v1/pets`, { method: "POST", body: "{}" })
    expect(create.status).toBe(404)
    expect(html).not.toContain(pets.key)
    const page = await browse(`${site}/`)
    await expectShown(page, pets.state.names)
    await pets.create(2)
    await expectShown(page, pets.state.names)
    await pets.restartWithPetsMissed(3)
    await pets.create(2)
    await expectShown(page, pets.state.names)
  })
})
