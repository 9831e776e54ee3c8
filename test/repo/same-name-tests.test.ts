import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/deploy.js';

/** The folders held to the rule: every file has a same-name unit test, or a first line naming where it is tested. */
const FOLDERS = ['src/store', 'src/gateway'];
const sources = FOLDERS.flatMap((folder) =>
  readdirSync(join(repoRoot, folder), { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile() && d.name.endsWith('.ts'))
    .map((d) => relative(repoRoot, join(d.parentPath, d.name))),
).sort();

describe('every file in src/store/ and src/gateway/ has a same-name unit test or names where it is tested', () => {
  it('finds the files (both store backends too)', () => {
    expect(sources).toContain('src/store/store.ts');
    expect(sources).toContain('src/store/redis/redis-store.ts');
    expect(sources).toContain('src/store/memory/memory-store.ts');
  });
  it.each(sources)('%s', (source) => {
    if (existsSync(join(repoRoot, 'test/unit', `${basename(source, '.ts')}.test.ts`))) return;
    const first = readFileSync(join(repoRoot, source), 'utf8').split('\n', 1)[0]!;
    expect(first, 'no test/unit/<name>.test.ts: its first line must be "// Tested in <test files>."').toMatch(
      /^\/\/ Tested in test\//,
    );
    const named = [...first.matchAll(/test\/[\w/-]+\.test\.ts/g)].map((m) => m[0]);
    for (const test of named) expect(existsSync(join(repoRoot, test)), test).toBe(true);
  });
});
