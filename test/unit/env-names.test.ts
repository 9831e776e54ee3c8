import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  editDistance,
  ENV_SETTING_NAMES,
  nearestEnvName,
  TOOLING_ENV_NAMES,
  TOOLING_ENV_PREFIXES,
  unknownEnvProblems,
} from '../../src/config/env-names.js';
import { envNamesInCode, repoRoot } from '../helpers/deploy.js';
import { codeSpans, readDoc, section, tableRows } from '../helpers/markdown.js';

const sorted = (names: Iterable<string>) => [...names].sort();

/** Text of every file under `dir` (recursive) whose name ends with one of `ends`. */
function filesUnder(dir: string, ends: string[]): string[] {
  return readdirSync(join(repoRoot, dir), { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile() && ends.some((e) => d.name.endsWith(e)))
    .map((d) => readFileSync(join(d.parentPath, d.name), 'utf8'));
}

/** KEYGATE_* names the suite and the scripts read or set in a process environment (not mere constants). */
function toolingNamesInUse(): Set<string> {
  const code = [...filesUnder('test', ['.ts']), ...filesUnder('scripts', ['.mjs'])];
  const shell = [...filesUnder('scripts', ['.sh']), readFileSync(join(repoRoot, '.ci/run'), 'utf8')];
  const inCode = [/process\.env\.(KEYGATE_\w+)/g, /process\.env\[['"](KEYGATE_\w+)['"]\]/g];
  // Shell: what a script exports, reads with a default, or passes through sudo.
  const inShell = [
    /^\s*export\s[^\n]*?\b(KEYGATE_\w+)(?==|\s|$)/gm,
    /\$\{(KEYGATE_\w+):-/g,
    /--preserve-env=[^\s]*?\b(KEYGATE_\w+)\b/g,
  ];
  const names = new Set<string>();
  for (const [texts, patterns] of [
    [code, inCode],
    [shell, inShell],
  ] as const)
    for (const text of texts) for (const p of patterns) for (const m of text.matchAll(p)) names.add(m[1]!);
  return names;
}

describe('src/config/env-names.ts: the runtime list of settings', () => {
  it('is every KEYGATE_* name the rest of src/ reads, no more, no less', () => {
    expect(sorted(ENV_SETTING_NAMES)).toEqual(sorted(envNamesInCode({ except: 'src/config/env-names.ts' })));
  });
  it("is every variable docs/reference/configuration.md describes (settings and the CLI helpers' variables)", () => {
    const doc = readDoc('docs/reference/configuration.md');
    const text = `${section(doc, 'Environment variables')}\n${section(doc, 'Variables of the CLI helpers')}`;
    const rows = tableRows(text)
      .filter((cells) => cells[0]!.startsWith('`KEYGATE_'))
      .flatMap((cells) => codeSpans(cells[0]!));
    // A table row each, but for the token and demo variables: a list item each.
    const listed = [...text.matchAll(/^- `(KEYGATE_\w+)`(?: and `(KEYGATE_\w+)`)?/gm)].flatMap((m) =>
      m.slice(1).filter(Boolean),
    );
    expect(sorted(new Set([...rows, ...listed]))).toEqual(sorted(ENV_SETTING_NAMES));
  });
  it('exempts exactly the names the test suite and scripts use, none of them a setting', () => {
    const inUse = toolingNamesInUse();
    const tooling = [...inUse].filter((n) => !ENV_SETTING_NAMES.includes(n));
    const unexempted = tooling.filter(
      (n) => !TOOLING_ENV_NAMES.includes(n) && !TOOLING_ENV_PREFIXES.some((p) => n.startsWith(p)),
    );
    expect(unexempted, 'add them to TOOLING_SUFFIXES or give them a reserved prefix').toEqual([]);
    expect(
      TOOLING_ENV_NAMES.filter((n) => !inUse.has(n)),
      'exempt names nothing uses',
    ).toEqual([]);
    expect(TOOLING_ENV_NAMES.filter((n) => ENV_SETTING_NAMES.includes(n))).toEqual([]);
  });
});

describe('unknownEnvProblems', () => {
  it.each([
    ['KEYGATE_REDIS_ULR', 'KEYGATE_REDIS_URL'],
    ['KEYGATE_UPSTRAEM', 'KEYGATE_UPSTREAM'],
    ['KEYGATE_ADMINPORT', 'KEYGATE_ADMIN_PORT'],
    ['KEYGATE_MANAGMENT_PORT', 'KEYGATE_MANAGEMENT_PORT'],
    ['KEYGATE_KEY_FILE', 'KEYGATE_KEYS_FILE'],
    ['KEYGATE_SECRET_ENCRYPTION_KEY_PREVOUS', 'KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS'],
    ['KEYGATE_LOGLEVEL', 'KEYGATE_LOG_LEVEL'],
  ])('%s names %s', (typo, meant) => {
    expect(unknownEnvProblems({ [typo]: 'x' })).toEqual([
      `${typo}: not a Keygate setting, ignored (did you mean ${meant}?)`,
    ]);
  });
  it('says nothing of settings, test-suite names, or variables without the prefix', () => {
    const env = Object.fromEntries(
      [
        ...ENV_SETTING_NAMES,
        ...TOOLING_ENV_NAMES,
        'KEYGATE_TEST_REDIS_URL',
        'KEYGATE_TEST_ANYTHING',
        'KEYGATE_CT_IMAGE',
        'REDIS_URL',
        'PATH',
      ].map((n) => [n, '1']),
    );
    expect(unknownEnvProblems(env)).toEqual([]);
  });
  it('lists every unknown name, sorted', () => {
    expect(
      unknownEnvProblems({ KEYGATE_ZZ: '', KEYGATE_PORTT: '1', KEYGATE_A: undefined }).map((p) => p.split(':')[0]),
    ).toEqual(['KEYGATE_A', 'KEYGATE_PORTT', 'KEYGATE_ZZ']);
  });
});

describe('editDistance / nearestEnvName', () => {
  it.each([
    ['', '', 0],
    ['abc', 'abc', 0],
    ['abc', 'acb', 1],
    ['ULR', 'URL', 1],
    ['kitten', 'sitting', 3],
    ['', 'abc', 3],
  ])('%s → %s is %i', (a, b, d) => {
    expect(editDistance(a, b)).toBe(d);
    expect(editDistance(b, a)).toBe(d);
  });
  it('takes the first of equally near names', () => {
    expect(nearestEnvName('B', ['A', 'C'])).toBe('A');
  });
});
