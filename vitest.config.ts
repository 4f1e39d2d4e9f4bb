import { configDefaults, defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The system tests run the compiled executable: `npm run test:system` (vitest.system.config.ts).
    exclude: [...configDefaults.exclude, "test/system/**"],
    // The service's log lines of a test are shown only when it fails.
    silent: "passed-only",
    // After the summary: how many tests were skipped, and why (PostgreSQL not configured, …).
    reporters: ["default", "./test/support/SkipReasons.ts"],
    // bun:sqlite exists only under Bun: tests run as `bun --bun vitest run`, in forked Bun processes.
    pool: "forks",
    testTimeout: 20_000
  }
})
