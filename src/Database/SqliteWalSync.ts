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
 * The WAL file's identity is checked at each sync all the same, and the directory is synced whenever the file is
 * opened, so that a WAL created meanwhile is itself on disk.
 *
 * A descriptor is never closed while a sync runs on it (a descriptor closed then could fail the sync, or be reused by
 * another file that the sync would then flush instead): a WAL replaced on its path has its old descriptor closed once
 * its last sync ends, and closing waits for the syncs running or waiting, whose commits are answered first.
 */
import { closeSync, fdatasync, fstatSync, fsyncSync, openSync, statSync } from "node:fs"
import { dirname } from "node:path"

/** How many syncs may run at once; the commits made while all of them run share the next. */
const MAX_SYNCS_AT_ONCE = 4

/** A descriptor of the WAL file, and how many syncs run on it: it is closed only when none does. */
interface Descriptor {
  readonly fd: number
  readonly inode: number
  syncing: number
}

export const makeWalSync = (databaseFile: string) => {
  const walFile = `${databaseFile}-wal`
  /** The descriptor of the file on the path, for the next sync. */
  let current: Descriptor | undefined
  let running = 0
  let waiting: Array<(error: Error | null) => void> = []
  let closing = false
  /** Called once the last sync has ended and the descriptors are closed. */
  let whenClosed: Array<() => void> = []

  /** Closes a descriptor that no sync runs on and none will: replaced on the path, or everything closing. */
  const retire = (descriptor: Descriptor) => {
    if (descriptor.syncing === 0 && (descriptor !== current || closing)) {
      if (descriptor === current) current = undefined
      closeSync(descriptor.fd)
    }
  }

  /** Once closing, with no sync running nor waiting: the descriptor closed, the callers of `close` told. */
  const closeIfIdle = () => {
    if (!closing || running > 0 || waiting.length > 0) return
    if (current !== undefined) retire(current)
    const done = whenClosed
    whenClosed = []
    for (const f of done) f()
  }

  /** A descriptor of the WAL file as it is now on the path (opened again if it was replaced). */
  const walDescriptor = (): Descriptor => {
    const inode = statSync(walFile).ino
    if (current !== undefined && current.inode === inode) return current
    const replaced = current
    const fd = openSync(walFile, "r")
    current = { fd, inode: fstatSync(fd).ino, syncing: 0 }
    if (replaced !== undefined) retire(replaced)
    const directory = openSync(dirname(walFile), "r")
    try {
      fsyncSync(directory)
    } finally {
      closeSync(directory)
    }
    return current
  }

  const start = () => {
    running++
    const covered = waiting
    waiting = []
    let descriptor: Descriptor | undefined
    const finish = (error: Error | null) => {
      running--
      for (const done of covered) done(error)
      if (descriptor !== undefined) {
        descriptor.syncing--
        retire(descriptor)
      }
      // The commits made meanwhile are synced even while closing: they wait for their answer.
      if (waiting.length > 0 && running < MAX_SYNCS_AT_ONCE) start()
      closeIfIdle()
    }
    try {
      descriptor = walDescriptor()
    } catch (error) {
      return finish(error as Error)
    }
    descriptor.syncing++
    fdatasync(descriptor.fd, finish)
  }

  return {
    /** Calls `done` once everything committed before this call is on disk (with the error when the sync failed). */
    afterSync: (done: (error: Error | null) => void) => {
      waiting.push(done)
      if (running < MAX_SYNCS_AT_ONCE) start()
    },
    /**
     * Closes the WAL's descriptors once the syncs running or waiting have ended (their callers answered), then calls
     * `done`. Nothing is synced after it but what was handed over before.
     */
    close: (done: () => void) => {
      closing = true
      whenClosed.push(done)
      closeIfIdle()
    }
  }
}
