/**
 * Why a test is skipped, said in the name of its suite (`… (skipped: REASON)`), so that the run's summary can count
 * the skipped tests by reason (`SkipReasons.ts`).
 */

/** PostgreSQL's suites without a server to run on. */
export const NO_POSTGRES =
  "PostgreSQL not configured: TEST_DATABASE_URL is unset; export TEST_DATABASE_URL=$(scripts/pg-test-cluster.sh start)"

const MARK = " (skipped: "

/** A suite's name that says why it is skipped. */
export const skippedName = (name: string, reason: string): string => `${name}${MARK}${reason})`

/** The reason a name gives, if it gives one. */
export const reasonIn = (name: string): string | undefined => {
  const at = name.indexOf(MARK)
  return at === -1 ? undefined : name.slice(at + MARK.length, name.endsWith(")") ? -1 : undefined)
}
