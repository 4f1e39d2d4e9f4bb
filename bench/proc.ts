/** What the kernel says of a process, for the benches (Linux's `/proc`). */
import { readFileSync } from "node:fs"

/** Clock ticks per second of `/proc/<pid>/stat`'s times (`getconf CLK_TCK`: 100 on Linux). */
const TICKS_PER_SECOND = 100

/** utime + stime of every thread (`/proc/<pid>/stat`), or of the main thread alone (`/proc/<pid>/task/<pid>/stat`). */
export const cpuTicks = (pid: number, thread: "all" | "main" = "all"): number => {
  const path = thread === "all" ? `/proc/${pid}/stat` : `/proc/${pid}/task/${pid}/stat`
  const fields = readFileSync(path, "utf8").split(") ")[1].split(" ")
  return Number(fields[11]) + Number(fields[12])
}

/** CPU µs per request, from the ticks a load took and the requests it made. */
export const microsPerRequest = (ticks: number, requests: number): number => (ticks / TICKS_PER_SECOND) * 1e6 / requests
