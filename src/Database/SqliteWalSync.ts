/**
 * Commits made durable off the JavaScript thread. The writer's connection commits with `synchronous = NORMAL`: the
 * COMMIT writes the transaction's frames to the WAL (the operating system's cache) and returns without an fsync. Here
 * the WAL file is then synced on the runtime's I/O threads (`fdatasync`, what SQLite's FULL does at each commit in WAL
 * mode), and a commit is acknowledged once its frames are on disk. A few syncs may run at once, so that a commit need
 * not wait for the sync of the one before; past that, the commits made meanwhile share the next sync.
 *
 * As durable as `synchronous = FULL`: a frame is acknowledged only after a sync that started after it was written. A
 * checkpoint keeps its own syncs under NORMAL (the WAL before, the database after), so an acknowledged frame that a
 * checkpoint moved is on disk in the database, and the WAL is only overwritten from its start after such a checkpoint.
 * The WAL file's identity is checked at each sync all the same, and the directory is synced whenever the file is opened,
 * so that a WAL created meanwhile is itself on disk.
 */
import { closeSync, fdatasync, fstatSync, fsyncSync, openSync, statSync } from "node:fs"
import { dirname } from "node:path"

/** How many syncs may run at once; the commits made while all of them run share the next. */
const MAX_SYNCS_AT_ONCE = 4

export const makeWalSync = (databaseFile: string) => {
  const walFile = `${databaseFile}-wal`
  let fd: number | undefined
  let inode = -1
  let running = 0
  let waiting: Array<(error: Error | null) => void> = []
  let closed = false

  /** A descriptor of the WAL file as it is now on the path (opened again if it was replaced). */
  const walDescriptor = (): number => {
    const current = statSync(walFile).ino
    if (fd !== undefined && current === inode) return fd
    if (fd !== undefined) closeSync(fd)
    fd = openSync(walFile, "r")
    inode = fstatSync(fd).ino
    const directory = openSync(dirname(walFile), "r")
    try {
      fsyncSync(directory)
    } finally {
      closeSync(directory)
    }
    return fd
  }

  const start = () => {
    running++
    const covered = waiting
    waiting = []
    const finish = (error: Error | null) => {
      running--
      for (const done of covered) done(error)
      if (waiting.length > 0 && !closed) start()
    }
    let descriptor: number
    try {
      descriptor = walDescriptor()
    } catch (error) {
      return finish(error as Error)
    }
    fdatasync(descriptor, finish)
  }

  return {
    /** Calls `done` once everything committed before this call is on disk (with the error when the sync failed). */
    afterSync: (done: (error: Error | null) => void) => {
      waiting.push(done)
      if (running < MAX_SYNCS_AT_ONCE) start()
    },
    close: () => {
      closed = true
      if (fd !== undefined) closeSync(fd)
      fd = undefined
    }
  }
}
