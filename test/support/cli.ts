/**
 * `src/main.ts` run by Bun as a subprocess, as an operator runs the command line: its own database file and only the
 * environment a test gives it, judged by exit code and output.
 */
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { tempDatabaseFile } from "./files.js"

export const root = fileURLToPath(new URL("../..", import.meta.url))

export interface Run {
  readonly status: number
  readonly stdout: string
  readonly stderr: string
}

/** Runs the program to completion; one still running after 30 seconds (a server that started) is a defect. */
export const spawnPetstore = (database: string, args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.sync((): Run => {
    const result = spawnSync(process.execPath, ["src/main.ts", ...args], {
      cwd: root,
      encoding: "utf8",
      timeout: 30_000,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: database, LOG_FORMAT: "json", ...env }
    })
    if (result.error !== undefined) throw result.error
    if (result.status === null) throw new Error(`petstore ${args.join(" ")} was killed by ${result.signal}`)
    return { status: result.status, stdout: result.stdout, stderr: result.stderr }
  })

/** `petstore`, with a database file of its own (removed with the scope) and only the environment a test gives it. */
export const makePetstore = Effect.map(
  tempDatabaseFile,
  (database) => (args: ReadonlyArray<string>, env: Record<string, string> = {}) => spawnPetstore(database, args, env)
)

export type Petstore = Effect.Effect.Success<typeof makePetstore>
