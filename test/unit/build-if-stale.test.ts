import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { staleReason } from '../../scripts/build-if-stale.mjs';

/** A tree with src/a.ts, src/sub/b.ts and their dist/ outputs, each file at the given second. */
function tree(times: Record<string, number | null>): string {
  const root = mkdtempSync(join(tmpdir(), 'keygate-stale-'));
  for (const [file, at] of Object.entries(times)) {
    if (at === null) continue;
    const path = join(root, file);
    mkdirSync(join(path, '..'), { recursive: true });
    writeFileSync(path, '');
    utimesSync(path, at, at);
  }
  return root;
}

const BUILT = {
  'src/index.ts': 100,
  'src/sub/b.ts': 100,
  'dist/index.js': 200,
  'dist/sub/b.js': 200,
  'tsconfig.json': 50,
};

describe('staleReason: is dist/ current?', () => {
  it.each([
    { name: 'built after every source and setting', times: BUILT, reason: undefined },
    {
      name: 'a source edited since',
      times: { ...BUILT, 'src/sub/b.ts': 300 },
      reason: 'src/sub/b.ts is newer than dist/',
    },
    {
      name: 'a new source never built',
      times: { ...BUILT, 'src/new.ts': 100 },
      reason: 'dist/ has no build of src/new.ts',
    },
    {
      name: 'a setting changed since',
      times: { ...BUILT, 'tsconfig.json': 300 },
      reason: 'tsconfig.json is newer than dist/',
    },
    { name: 'never built', times: { ...BUILT, 'dist/index.js': null }, reason: 'dist/ has not been built' },
  ])('$name', ({ times, reason }) => {
    const root = tree(times);
    try {
      expect(staleReason(root)).toBe(reason);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
