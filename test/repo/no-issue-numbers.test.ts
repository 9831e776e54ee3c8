import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/deploy.js';

/**
 * "issue 42", "issues 27 and 28", "#42", "pre-issue-27": a tracker's number means nothing to a reader of the
 * code. A comment says why the code is so; the history is in git and CHANGELOG.md.
 */
const ISSUE_NUMBER = /\bissues? #?\d+|(?<![\w&])#\d{2,}\b|\bissue-\d+/i;

const sources = readdirSync(join(repoRoot, 'src'), { recursive: true, withFileTypes: true })
  .filter((d) => d.isFile() && d.name.endsWith('.ts'))
  .map((d) => relative(repoRoot, join(d.parentPath, d.name)))
  .sort();

describe('no issue numbers in src/', () => {
  it('reads the sources', () => {
    expect(sources.length).toBeGreaterThan(100);
  });
  it.each(['see issue 42', 'Issue 27: a fix', 'issues 27 and 28', 'fixed in #42', 'the pre-issue-27 layout'])(
    'the pattern finds %j',
    (text) => {
      expect(text).toMatch(ISSUE_NUMBER);
    },
  );
  it.each(['a 429 10429 answer', 'the /64 of an address', '&#39;', 'an issuer', 'tissue 3'])(
    'and leaves %j alone',
    (text) => {
      expect(text).not.toMatch(ISSUE_NUMBER);
    },
  );
  it('no file in src/ names an issue number (each line that does is listed)', () => {
    const found = sources.flatMap((file) =>
      readFileSync(join(repoRoot, file), 'utf8')
        .split('\n')
        .flatMap((line, i) => (ISSUE_NUMBER.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : [])),
    );
    expect(found).toEqual([]);
  });
});
