// ESLint: the recommended sets of ESLint and typescript-eslint (type-checked for TypeScript), and a
// few departures, each with its reason. Formatting is Prettier's (.prettierrc.json), not ESLint's.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['dist/', 'coverage/', 'bench-results/'] },
  { linterOptions: { reportUnusedDisableDirectives: 'error' } },
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      globals: globals.node,
      parserOptions: {
        projectService: { allowDefaultProject: ['vitest.config.ts', 'vitest.containers.config.ts'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      // `const { secret: _secret, ...rest } = record` is how a field is left out of a copy.
      '@typescript-eslint/no-unused-vars': ['error', { ignoreRestSiblings: true }],
      // Parts are factories returning closures (createX(options, deps)), not classes: nothing uses `this`.
      '@typescript-eslint/unbound-method': 'off',
      // Async methods without await implement async interfaces (Store, the memory store): a throw
      // becomes a rejection, as callers expect.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    files: ['test/**/*.ts'],
    rules: {
      // Tests read parsed JSON bodies, YAML and logs (`any`) and assert on them: the assertions are the
      // type check.
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      // Failure messages interpolate whatever came back (header values, caught errors) as it is.
      '@typescript-eslint/restrict-template-expressions': 'off',
      '@typescript-eslint/no-base-to-string': 'off',
    },
  },
  {
    // Plain JavaScript (scripts/ is type-checked by tsc with tsconfig.scripts.json instead; bin/,
    // console/ and the tools' config files are in no TypeScript project), so no type-aware rules.
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    extends: [tseslint.configs.disableTypeChecked],
  },
  { files: ['console/**/*.js'], languageOptions: { globals: globals.browser } },
);
