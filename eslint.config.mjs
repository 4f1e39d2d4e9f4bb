// ESLint with Effect's own formatting rule (dprint, as Effect's repositories configure it) and typescript-eslint's
// recommended checks. `npm run lint` checks; `npm run lint:fix` also formats. `npm test` runs the check.
import effect from "@effect/eslint-plugin"
import js from "@eslint/js"
import tseslint from "typescript-eslint"

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", "bench/results/**", "scripts/petstore.order", ".scratch/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["**/*.ts", "**/*.mjs"],
    plugins: { "@effect": effect },
    rules: {
      "@effect/dprint": ["error", {
        config: {
          indentWidth: 2,
          lineWidth: 120,
          semiColons: "asi",
          quoteStyle: "alwaysDouble",
          trailingCommas: "never",
          operatorPosition: "maintain",
          "arrowFunction.useParentheses": "force"
        }
      }],
      // The type checker reports unused names (noUnusedLocals, noUnusedParameters).
      "@typescript-eslint/no-unused-vars": "off",
      "@typescript-eslint/no-explicit-any": "off",
      // Effect's Tag classes are declared as empty classes that extend a factory's result.
      "@typescript-eslint/no-extraneous-class": "off",
      "no-constant-condition": ["error", { checkLoops: false }]
    }
  }
)
