/**
 * Vitest's global setup: says once, at the start of the run, when the PostgreSQL suites are skipped and how to run them.
 */
export default function notice() {
  if (!process.env.TEST_DATABASE_URL) {
    console.log(
      "\n  PostgreSQL (skipped: set TEST_DATABASE_URL): the suites run on SQLite only. To run them on PostgreSQL too:\n" +
        "    export TEST_DATABASE_URL=$(scripts/pg-test-cluster.sh start)\n"
    )
  }
}
