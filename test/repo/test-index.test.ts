import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { importersBySource, importSpecifiers, renderTestIndex, TEST_INDEX_PATH } from '../../scripts/test-index.mjs';
import { repoRoot } from '../helpers/deploy.js';

describe('importSpecifiers', () => {
  it.each([
    ["import { a } from '../../src/x.js';", ['../../src/x.js']],
    ["import type { A } from '../helpers/y.js';", ['../helpers/y.js']],
    ["export { b } from './z.js';", ['./z.js']],
    ["import './side-effect.js';", ['./side-effect.js']],
    ["const m = await import('../../src/w.js');", ['../../src/w.js']],
    ['import { c } from "./double.js";', ['./double.js']],
    ["import { d } from 'vitest';", []],
    ["import { e } from 'node:fs';", []],
    ["import { a } from './x.js';\nimport { b } from './x.js';", ['./x.js']],
  ])('%s', (text, want) => {
    expect(importSpecifiers(text)).toEqual(want);
  });
});

describe(`${TEST_INDEX_PATH}, generated from the imports in test/`, () => {
  const index = importersBySource(repoRoot);

  it('is up to date (regenerate with npm run test-index)', () => {
    const committed = readFileSync(join(repoRoot, TEST_INDEX_PATH), 'utf8');
    expect(committed === renderTestIndex(repoRoot), `${TEST_INDEX_PATH} is stale: run npm run test-index`).toBe(true);
  });

  // Known pairs, one per kind of link the index draws, so a parser that finds nothing cannot pass.
  it.each([
    ['src/pipeline/check-target.ts', 'tests', 'test/unit/check-target.test.ts'],
    ['src/policy/policy-source.ts', 'tests', 'test/e2e/policy-source.test.ts'],
    ['src/keys/key-changes.ts', 'tests', 'test/e2e/rotation-expiry.test.ts'],
    ['src/create-keygate.ts', 'helpers', 'test/helpers/keygate.ts'],
    ['src/files/file-reloader.ts', 'sources', 'src/policy/policy-source.ts'],
  ] as const)('%s: %s include %s', (source, column, file) => {
    expect(index.get(source)?.[column]).toContain(file);
  });
  it('lists a same-name unit test before the others', () => {
    expect(index.get('src/keys/key-changes.ts')?.tests[0]).toBe('test/unit/key-changes.test.ts');
  });
  it('has one row per file in src/', () => {
    const rows = readFileSync(join(repoRoot, TEST_INDEX_PATH), 'utf8')
      .split('\n')
      .filter((line) => line.startsWith('| [`src/'));
    expect(rows.length).toBe(index.size);
    expect(index.size).toBeGreaterThan(50);
  });
});
