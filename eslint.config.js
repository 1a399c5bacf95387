// Type-aware lint for the whole project; formatting is Prettier's job.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  {
    // templates/ holds `pulumi new` projects with their own package.json and tsconfig; the
    // template e2e test installs and runs them.
    ignores: ["dist/**", "node_modules/**", "templates/**", "**/*.mjs", "eslint.config.js"],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": [
        "error",
        {
          // node:test's describe/test return promises the runner itself awaits.
          allowForKnownSafeCalls: [
            { from: "package", name: ["describe", "test", "it", "suite"], package: "node:test" },
          ],
        },
      ],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
      "@typescript-eslint/require-await": "off",
    },
  },
  {
    // One concern per function: none over 80 lines in the engine, the controller and the
    // components. The files listed below still hold one and are being split; the list only
    // shrinks.
    files: ["engine/**/*.ts", "controller/**/*.ts", "sdk/**/*.ts"],
    ignores: [
      // still to split
      "controller/cocoonset-reconciler.ts",
      "engine/execute/pass-executor.ts",
      "engine/hibernation/hibernation.ts",
      "engine/lifecycle/slot-release.ts",
      "engine/plan/status.ts",
      "engine/planner/plan.ts",
      "sdk/fleet.ts",
    ],
    rules: {
      "max-lines-per-function": ["error", { max: 80, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    // CommonJS launchers (the language host's): plain JavaScript rules, Node's globals.
    files: ["**/*.cjs"],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: "commonjs",
      globals: {
        require: "readonly",
        module: "writable",
        __dirname: "readonly",
        __filename: "readonly",
        process: "readonly",
        console: "readonly",
      },
    },
    rules: {
      ...tseslint.configs.disableTypeChecked.rules,
      "@typescript-eslint/no-require-imports": "off",
    },
  },
);
