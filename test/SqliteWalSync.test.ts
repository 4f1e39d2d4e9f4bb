/**
 * The syncs of the WAL: a descriptor is closed only once no sync runs on it, when the writer closes or when the WAL
 * file was replaced, and every commit waiting for a sync is answered.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { readdirSync, readlinkSync, renameSync, writeFileSync } from "node:fs"
import { makeWalSync } from "../src/Database/SqliteWalSync.js"
import { tempDatabaseFile } from "./support/files.js"

/** This process's descriptors open on `path` (a file since replaced on the path included). */
const descriptorsOn = (path: string) =>
  readdirSync("/proc/self/fd").filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`).startsWith(path)
    } catch {
      return false
    }
  }).length

/** A WAL file and its syncs; `syncs` answers with the sync's error. */
const setUp = Effect.gen(function*() {
  const file = yield* tempDatabaseFile
  const wal = `${file}-wal`
  writeFileSync(wal, "frames")
  const walSync = makeWalSync(file)
  const sync = () =>
    new Promise<{ readonly error: Error | null; readonly open: number }>((resolve) =>
      walSync.afterSync((error) => resolve({ error, open: descriptorsOn(wal) }))
    )
  const close = () => new Promise<void>((resolve) => walSync.close(resolve))
  return { wal, sync, close }
})

describe("SqliteWalSync", () => {
  it.scopedLive("closing waits for the syncs in flight: they are answered first, then the descriptor is closed", () =>
    Effect.gen(function*() {
      const { close, sync, wal } = yield* setUp
      let answered = 0
      const syncs = [sync(), sync()].map((p) => p.then((outcome) => (answered++, outcome)))
      yield* Effect.promise(close)
      expect(answered).toBe(2)
      for (const { error, open } of yield* Effect.promise(() => Promise.all(syncs))) {
        expect(error).toBeNull()
        expect(open).toBe(1)
      }
      expect(descriptorsOn(wal)).toBe(0)
    }))

  it.scopedLive("a WAL replaced on its path: the old descriptor is closed once its sync is over", () =>
    Effect.gen(function*() {
      const { close, sync, wal } = yield* setUp
      const first = sync()
      writeFileSync(`${wal}.new`, "frames")
      renameSync(`${wal}.new`, wal)
      const second = sync()
      // The first sync ends with its descriptor still open (beside the new file's).
      expect(yield* Effect.promise(() => first)).toEqual({ error: null, open: 2 })
      expect((yield* Effect.promise(() => second)).error).toBeNull()
      yield* Effect.promise(close)
      expect(descriptorsOn(wal)).toBe(0)
    }))
})
