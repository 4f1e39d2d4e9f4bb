/**
 * Headless Chromium (Debian's `chromium`), driven over its DevTools protocol with Bun's WebSocket: a page opened at a
 * URL, expressions evaluated in it, and what it logged (console messages, uncaught exceptions) kept for a failure's
 * message. Each browser has its own fresh profile directory, removed when it closes, and is killed by its pid.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** The first of these commands that is on PATH. */
export const onPath = (...commands: ReadonlyArray<string>): string | undefined =>
  commands.find((command) => spawnSync("sh", ["-c", `command -v ${command}`]).status === 0)

const CHROMIUM = onPath("chromium", "chromium-browser")

/** Why Chromium cannot run here, if it cannot. */
export const NO_CHROMIUM = CHROMIUM === undefined
  ? "chromium not installed: apt-get install --no-install-recommends chromium (.ci/run does)"
  : undefined

/** Headless, as root too, and nothing of its own on the network (no updates, no sync, no QUIC). */
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--remote-debugging-address=127.0.0.1",
  "--remote-debugging-port=0"
]

export interface Page {
  /** The value of an expression evaluated in the page (JSON-serialisable), awaited if it is a promise. */
  readonly evaluate: <A>(expression: string) => Promise<A>
  /** What the page logged so far: console messages and uncaught exceptions, one a line. */
  readonly log: () => string
  readonly close: () => Promise<void>
}

interface Message {
  readonly id?: number
  readonly method?: string
  readonly params?: any
  readonly result?: any
  readonly error?: { readonly message: string }
}

const describeArgument = (argument: { readonly value?: unknown; readonly description?: string }) =>
  argument.description ?? JSON.stringify(argument.value)

const running = new Set<ChildProcess>()

process.once("exit", () => {
  for (const child of running) {
    if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, "SIGKILL")
  }
})

/** Chromium with one page open at `url`, once the page has loaded. */
export const openPage = async (url: string): Promise<Page> => {
  const profile = mkdtempSync(join(tmpdir(), "petstore-chromium-"))
  const child: ChildProcess = spawn(CHROMIUM!, [...FLAGS, `--user-data-dir=${profile}`, "about:blank"], {
    stdio: ["ignore", "ignore", "pipe"]
  })
  running.add(child)
  const exited = new Promise<void>((done) => child.once("exit", () => (running.delete(child), done())))
  let stderr = ""
  const endpoint = await new Promise<string>((done, fail) => {
    const timer = setTimeout(
      () => fail(new Error(`chromium did not start within 20 s:\n${stderr.slice(-2000)}`)),
      20_000
    )
    child.stderr!.on("data", (chunk) => {
      stderr += chunk
      const found = /DevTools listening on (ws:\/\/\S+)/.exec(stderr)
      if (found !== null) {
        clearTimeout(timer)
        done(found[1])
      }
    })
    child.once("exit", (code) => {
      clearTimeout(timer)
      fail(new Error(`chromium exited with ${code}:\n${stderr.slice(-2000)}`))
    })
  })
  const socket = new WebSocket(endpoint)
  await new Promise((done, fail) => {
    socket.addEventListener("open", done, { once: true })
    socket.addEventListener("error", () => fail(new Error(`no DevTools connection at ${endpoint}`)), { once: true })
  })
  const lines: Array<string> = []
  const waiting = new Map<number, { done: (result: any) => void; fail: (error: Error) => void }>()
  const loaded: Array<() => void> = []
  socket.addEventListener("message", (event) => {
    const message: Message = JSON.parse(String(event.data))
    if (message.id !== undefined) {
      const reply = waiting.get(message.id)
      waiting.delete(message.id)
      if (message.error !== undefined) reply?.fail(new Error(message.error.message))
      else reply?.done(message.result)
    } else if (message.method === "Runtime.consoleAPICalled") {
      lines.push(`console.${message.params.type}: ${message.params.args.map(describeArgument).join(" ")}`)
    } else if (message.method === "Runtime.exceptionThrown") {
      const details = message.params.exceptionDetails
      lines.push(`uncaught: ${details.exception?.description ?? details.text}`)
    } else if (message.method === "Page.loadEventFired") {
      for (const done of loaded.splice(0)) done()
    }
  })
  let next = 0
  let sessionId: string | undefined
  const send = (method: string, params: object = {}): Promise<any> =>
    new Promise((done, fail) => {
      const id = ++next
      waiting.set(id, { done, fail })
      socket.send(JSON.stringify({ id, method, params, ...(sessionId === undefined ? {} : { sessionId }) }))
    })
  const close = async () => {
    socket.close()
    if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, "SIGKILL")
    await exited
    rmSync(profile, { recursive: true, force: true })
  }
  try {
    const { targetInfos } = await send("Target.getTargets")
    const target = targetInfos.find((info: { type: string }) => info.type === "page")
    sessionId = (await send("Target.attachToTarget", { targetId: target.targetId, flatten: true })).sessionId
    await send("Runtime.enable")
    await send("Page.enable")
    const load = new Promise<void>((done) => loaded.push(done))
    await send("Page.navigate", { url })
    await load
  } catch (error) {
    await close()
    throw error
  }
  return {
    evaluate: async (expression) => {
      const { result, exceptionDetails } = await send("Runtime.evaluate", {
        expression,
        awaitPromise: true,
        returnByValue: true
      })
      if (exceptionDetails !== undefined) {
        throw new Error(`${expression}: ${exceptionDetails.exception?.description ?? exceptionDetails.text}`)
      }
      return result.value
    },
    log: () => lines.join("\n"),
    close
  }
}
