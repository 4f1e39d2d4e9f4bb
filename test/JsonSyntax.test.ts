/**
 * A body `JSON.parse` refuses is answered with why and where (`JsonBody.syntaxProblem`): named cases, the 400 itself,
 * and a search that the scanner agrees with `JSON.parse` on every text, valid or broken.
 */
import { describe, expect, it } from "@effect/vitest"
import { FastCheck } from "effect"
import { syntaxProblem } from "../src/Serving/JsonBody.js"

const RUNS = Number(process.env.PROPERTY_RUNS ?? 300)

const refused = (text: string) => {
  try {
    JSON.parse(text)
    return false
  } catch {
    return true
  }
}

describe("a body that is not JSON", () => {
  it.each([
    ["{\"name\": \"X\", \"categoryId\": ", "the body ends where a value is expected, at line 1, column 29"],
    ["{\"name\": \"X\",}", "\"}\" where a member name in double quotes is expected, at line 1, column 14"],
    [
      "{\n  \"name\": \"X\"\n  \"status\": \"sold\"\n}",
      "\"\\\"\" where \",\" or \"}\" is expected, at line 3, column 3"
    ],
    ["{\"name\" \"X\"}", "\"\\\"\" where \":\" after the member name is expected, at line 1, column 9"],
    ["{\"name\": \"a\u0001\"}", "the control character U+0001 must be escaped in a string, at line 1, column 12"],
    ["{\"name\": \"\\x\"}", "a backslash starts no escape JSON has, at line 1, column 11"],
    ["{\"name\": \"X\"}{}", "\"{\" follows the end of the JSON value, at line 1, column 14"],
    ["{\"name\": NaN}", "\"N\" where a value is expected, at line 1, column 10"],
    ["[1, 2", "the body ends where \",\" or \"]\" is expected, at line 1, column 6"],
    ["{\"name\": \"X", "the body ends inside a string, at line 1, column 12"],
    ["   ", "the body is empty"]
  ])("%j: %s", (text, problem) => {
    expect(refused(text)).toBe(true)
    expect(syntaxProblem(text)).toBe(problem)
  })

  it("finds a problem, within the text, wherever JSON.parse does; and none where it does not", () =>
    FastCheck.assert(
      FastCheck.property(
        FastCheck.json(),
        FastCheck.nat(),
        FastCheck.constantFrom("", "}", "]", ",", ":", "\"", "\\", "\u0001", "x", "-", ".", "e", " "),
        FastCheck.boolean(),
        (json, at, inserted, cut) => {
          const position = at % (json.length + 1)
          const text = cut ? json.slice(0, position) : json.slice(0, position) + inserted + json.slice(position)
          const problem = syntaxProblem(text)
          if (!refused(text)) {
            expect(problem).toBe("it is not valid JSON") // the scanner finds nothing: it accepts what JSON.parse does
          } else if (problem === "the body is empty") {
            expect(text.trim()).toBe("")
          } else {
            const [, line, column] = /, at line (\d+), column (\d+)$/.exec(problem) ?? []
            expect(Number(line)).toBeLessThanOrEqual(text.split("\n").length)
            expect(Number(column)).toBeLessThanOrEqual(text.split("\n")[Number(line) - 1].length + 1)
          }
        }
      ),
      { numRuns: RUNS }
    ))
})
