import { defineConfig } from "vitest/config"

/**
 * The system tests: the compiled executable (dist/petstore) as a user runs it, over loopback sockets. Run by
 * `npm run test:system`, which builds it first. One file at a time: they measure a server under load and kill it. The
 * PostgreSQL ones (two replicas) need TEST_DATABASE_URL, and say so when they are skipped. Not part of `npm test`.
 */
export default defineConfig({
  test: {
    include: ["test/system/**/*.test.ts"],
    pool: "forks",
    // Console output of a test is shown only when it fails; after the summary, the skipped tests and why.
    silent: "passed-only",
    reporters: ["default", "./test/support/SkipReasons.ts"],
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 60_000
  }
})
