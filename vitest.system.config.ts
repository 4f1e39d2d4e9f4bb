import { defineConfig } from "vitest/config"

// The system tests: the compiled executable against a real PostgreSQL server (`npm run test:replicas`, after
// `npm run build`, with TEST_DATABASE_URL set). Not part of `npm test`.
export default defineConfig({
  test: {
    include: ["test/system/**/*.test.ts"],
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 60_000
  }
})
