/**
 * A reporter beside Vitest's own: after the summary, how many tests were skipped and why, by the reason their suite's
 * name gives (`skips.ts`); a test skipped by a condition of its own (`skipIf`) is named.
 */
import type { Reporter, TestCase, TestModule } from "vitest/node"
import { reasonIn } from "./skips.js"

const reasonOf = (test: TestCase): string | undefined => {
  for (let node: TestCase["parent"] | TestCase = test; node.type !== "module"; node = node.parent) {
    const reason = reasonIn(node.name)
    if (reason !== undefined) return reason
  }
  return undefined
}

export default class SkipReasons implements Reporter {
  private lines: Array<string> = []

  onTestRunEnd(modules: ReadonlyArray<TestModule>) {
    const byReason = new Map<string, number>()
    const own: Array<string> = []
    for (const module of modules) {
      for (const test of module.children.allTests("skipped")) {
        const reason = reasonOf(test)
        if (reason === undefined) own.push(test.fullName)
        else byReason.set(reason, (byReason.get(reason) ?? 0) + 1)
      }
    }
    const lines = [...byReason].map(([reason, count]) => `   Skipped  ${count}: ${reason}`)
    if (own.length > 0) {
      lines.push(`   Skipped  ${own.length} where they do not apply here: ${own.join("; ")}`)
    }
    this.lines = lines
  }

  // Called after `onTestRunEnd`, once Vitest's own reporter has printed the summary in its `onFinished`.
  onFinished() {
    if (this.lines.length > 0) process.stdout.write(`${this.lines.join("\n")}\n\n`)
  }
}
