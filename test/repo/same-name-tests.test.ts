import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/deploy.js';

/** Every file in src/ has a same-name unit test, or a first line naming where it is tested. */
const sources = readdirSync(join(repoRoot, 'src'), { recursive: true, withFileTypes: true })
  .filter((d) => d.isFile() && d.name.endsWith('.ts'))
  .map((d) => relative(repoRoot, join(d.parentPath, d.name)))
  .sort();

describe('every file in src/ has a same-name unit test or names where it is tested', () => {
  it('finds the files (every folder, both store backends, the top-level ones)', () => {
    expect(sources).toContain('src/errors.ts');
    expect(sources).toContain('src/store/store.ts');
    expect(sources).toContain('src/store/redis/redis-store.ts');
    expect(sources).toContain('src/store/memory/memory-store.ts');
    expect(sources).toContain('src/cli/main.ts');
    expect(sources.length).toBeGreaterThan(150);
  });
  it.each(sources)('%s', (source) => {
    if (existsSync(join(repoRoot, 'test/unit', `${basename(source, '.ts')}.test.ts`))) return;
    const first = readFileSync(join(repoRoot, source), 'utf8').split('\n', 1)[0]!;
    expect(first, 'no test/unit/<name>.test.ts: its first line must be "// Tested in <test files>."').toMatch(
      /^\/\/ Tested in test\//,
    );
    const named = [...first.matchAll(/test\/[\w/-]+\.test\.ts/g)].map((m) => m[0]);
    expect(named.length, 'the line names at least one test file').toBeGreaterThan(0);
    for (const test of named) expect(existsSync(join(repoRoot, test)), test).toBe(true);
  });
});
