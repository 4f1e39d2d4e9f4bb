import { defineConfig } from "vitest/config"

// System tests: the compiled executable (dist/petstore; `npm run test:system` builds it first), as an operator runs
// it. The PostgreSQL ones (two replicas) need TEST_DATABASE_URL, and say so when they are skipped. Not part of `npm test`.
export default defineConfig({
  test: {
    include: ["test/system/**/*.test.ts"],
    pool: "forks",
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 60_000
  }
})
