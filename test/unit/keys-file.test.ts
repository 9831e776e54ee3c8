import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { KeysFileError, loadKeysFile } from '../../src/keys/keys-file.js';
import { parseFlatYaml } from '../../src/files/flat-yaml.js';

const dir = mkdtempSync(join(tmpdir(), 'keygate-keys-file-'));
const write = (name: string, text: string) => {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
};
const SECRET = 'never-shown-secret-0123456789';

/** The same keys three ways: JSON, YAML the fast reader takes, YAML only the yaml package reads (a document marker). */
function forms(yamlBody: string, json: unknown): Array<[string, boolean, string]> {
  return [
    ['json', false, JSON.stringify(json)],
    ['yaml', true, yamlBody],
    ['yaml', false, `---\n${yamlBody}`],
  ];
}

const problems = (file: string): string[] => {
  try {
    loadKeysFile(file);
  } catch (err) {
    if (err instanceof KeysFileError) return [...err.problems].map((p) => p.replace(file, 'F'));
    throw err;
  }
  return [];
};

describe('loadKeysFile', () => {
  const good = {
    keys: [
      { apiKey: 'a', apiSecret: SECRET, scopes: ['accounts:read'], rateLimit: { rate: '10/s', burst: 20 } },
      { apiKey: 'b', apiSecret: SECRET, scopes: ['accounts:read'], allowIps: ['10.0.0.0/8'], state: 'revoked' },
    ],
  };
  const goodYaml = [
    'keys:',
    `  - apiKey: a`,
    `    apiSecret: ${SECRET}`,
    '    scopes: [accounts:read]',
    '    rateLimit: { rate: 10/s, burst: 20 }',
    `  - apiKey: b`,
    `    apiSecret: ${SECRET}`,
    '    scopes:',
    '      - accounts:read',
    '    allowIps: [10.0.0.0/8]',
    '    state: revoked',
    '',
  ].join('\n');

  it.each(forms(goodYaml, good))('reads the same records from %s (fast reader: %s)', (ext, fast, text) => {
    const file = write(`good-${ext}-${fast}-${text.length}.${ext}`, text);
    if (ext === 'yaml') expect(parseFlatYaml(Buffer.from(text)) !== undefined).toBe(fast);
    const records = loadKeysFile(file);
    expect(records.map((r) => [r.apiKey, r.scopes, r.allowIps, r.state, r.rateLimit])).toEqual([
      ['a', ['accounts:read'], [], 'active', { rate: '10/s', burst: 20 }],
      ['b', ['accounts:read'], ['10.0.0.0/8'], 'revoked', undefined],
    ]);
    // One load, one copy of each distinct list.
    expect(records[0]!.scopes).toBe(records[1]!.scopes);
  });

  const boundJson = {
    keys: [
      { apiKey: 'a', apiSecret: SECRET, binding: 'required' },
      { apiKey: 'b', apiSecret: SECRET, binding: 'off' },
      { apiKey: 'c', apiSecret: SECRET },
    ],
  };
  const boundYaml = [
    'keys:',
    '  - apiKey: a',
    `    apiSecret: ${SECRET}`,
    '    binding: required',
    '  - apiKey: b',
    `    apiSecret: ${SECRET}`,
    '    binding: off',
    '  - apiKey: c',
    `    apiSecret: ${SECRET}`,
    '',
  ].join('\n');

  it.each(forms(boundYaml, boundJson))(
    'reads binding (issue 43) from %s (fast reader: %s): off is absent',
    (ext, fast, text) => {
      const file = write(`bound-${ext}-${fast}-${text.length}.${ext}`, text);
      expect(loadKeysFile(file).map((r) => [r.apiKey, r.binding])).toEqual([
        ['a', 'required'],
        ['b', undefined],
        ['c', undefined],
      ]);
    },
  );

  it('refuses a binding other than off or required', () => {
    const file = write(
      'bad-binding.json',
      JSON.stringify({ keys: [{ apiKey: 'a', apiSecret: SECRET, binding: 'yes' }] }),
    );
    expect(problems(file).join('\n')).toMatch(/binding/);
  });

  const bad = {
    keys: [
      { apiKey: 'a', apiSecret: SECRET },
      { apiKey: 'a', apiSecret: SECRET },
      { apiKey: 'c', apiSecret: 'short', allowIps: ['nope'], typo: 1 },
      { apiKey: 'd', apiSecret: SECRET, scopes: ['bad scope'], state: 'gone' },
    ],
  };
  const badYaml = [
    'keys:',
    '  - apiKey: a',
    `    apiSecret: ${SECRET}`,
    '  - apiKey: a',
    `    apiSecret: ${SECRET}`,
    '  - apiKey: c',
    '    apiSecret: short',
    '    allowIps: [nope]',
    '    typo: 1',
    '  - apiKey: d',
    `    apiSecret: ${SECRET}`,
    "    scopes: ['bad scope']",
    '    state: gone',
    '',
  ].join('\n');

  it.each(forms(badYaml, bad))(
    'lists every problem of a %s file at once, no secret in any (fast reader: %s)',
    (ext, _fast, text) => {
      const file = write(`bad-${ext}-${text.length}.${ext}`, text);
      const found = problems(file);
      expect(found).toEqual([
        'F: keys[1]: duplicate apiKey',
        'F: keys[1]: duplicate id',
        'F: keys[2].apiSecret: must be at least 16 bytes',
        'F: keys[2].allowIps: invalid IP or CIDR "nope"',
        'F: keys[3].scopes: invalid scope "bad scope"',
        'F: keys[3].state: must be "active" or "revoked"',
        'F: keys[2].typo: unknown setting (not in the schema; a typo?)',
      ]);
      expect(found.join('\n')).not.toContain(SECRET);
      expect(found.join('\n')).not.toContain('short');
    },
  );

  it.each<[string, string]>([
    ['an unclosed quote', `keys:\n  - apiKey: a\n    apiSecret: "${SECRET}\n`],
    ['a mapping in a value', `keys:\n  - apiKey: a\n    apiSecret: ${SECRET}: x\n`],
    ['a bad indentation', `keys:\n  - apiKey: a\n   apiSecret: ${SECRET}\n`],
  ])('reports YAML that does not parse (%s) by line, never its text', (_name, text) => {
    const file = write(`syntax-${text.length}.yaml`, text);
    const found = problems(file);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(/^F: not valid YAML: syntax error at line \d+, column \d+/);
    expect(found[0]).not.toContain(SECRET);
  });

  it('refuses a keys file with a Latin-1 byte in a secret, naming its byte offset (whichever reader)', () => {
    for (const [ext, head, tail] of [
      ['yaml', 'keys:\n  - { apiKey: a, apiSecret: caf', `-${SECRET} }\n`],
      ['yaml', 'keys:\n  - apiKey: a\n    apiSecret: caf', `-${SECRET}\n`],
      ['json', '{"keys": [{"apiKey": "a", "apiSecret": "caf', `-${SECRET}"}]}`],
    ] as const) {
      const file = join(dir, `latin1-${ext}-${head.length}.${ext}`);
      writeFileSync(file, Buffer.concat([Buffer.from(head), Buffer.from([0xe9]), Buffer.from(tail)]));
      const found = problems(file);
      expect(found).toHaveLength(1);
      expect(found[0]).toMatch(
        new RegExp(`^F: not valid UTF-8: .*byte offset ${Buffer.byteLength(head)} \\(line \\d+\\)`),
      );
      expect(found[0]).not.toContain(SECRET);
    }
  });
});
