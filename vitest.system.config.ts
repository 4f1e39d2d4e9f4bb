import { defineConfig } from "vitest/config"

// System tests run the compiled executable (dist/petstore): `npm run test:system` builds it first.
export default defineConfig({
  test: {
    include: ["test/system/**/*.test.ts"],
    pool: "forks",
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 60_000
  }
})
