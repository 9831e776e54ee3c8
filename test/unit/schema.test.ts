import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { loadPolicy } from '../../src/policy/load-policy.js';
import { SCHEMA_FILES } from '../../src/files/schema.js';
import { loadKeysFile, KeysFileError } from '../../src/keys/keys-file.js';
import { toExternal } from '../../src/keys/key-record.js';
import { repoRoot } from '../helpers/deploy.js';
import { makeKey } from '../helpers/make-key.js';

const dir = mkdtempSync(join(tmpdir(), 'keygate-schema-'));
let n = 0;
const file = (text: string, ext = 'yaml') => {
  const path = join(dir, `f${n++}.${ext}`);
  writeFileSync(path, text);
  return path;
};
const policyProblems = (text: string) => {
  const path = file(text);
  const problems: string[] = [];
  loadPolicy(path, problems);
  return problems.map((p) => p.slice(path.length + 2));
};
const keysProblems = (text: string) => {
  const path = file(text);
  try {
    loadKeysFile(path);
    return [];
  } catch (err) {
    if (!(err instanceof KeysFileError)) throw err;
    return err.problems.map((p) => p.slice(path.length + 2));
  }
};
/** `# yaml-language-server: $schema=<path>` as editors read it, resolved against the file. */
const declaredSchema = (path: string) => {
  const m = /^# yaml-language-server: \$schema=(\S+)$/m.exec(readFileSync(path, 'utf8'));
  return m ? resolve(dirname(path), m[1]!) : undefined;
};

describe('published JSON Schemas (config/schema/*.json)', () => {
  it('ship with the package, and the shipped files point editors at them', () => {
    const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
      files: string[];
      dependencies: Record<string, string>;
    };
    expect(pkg.files).toContain('config');
    expect(pkg.dependencies.ajv, 'ajv validates at load, so it is a runtime dependency').toBeDefined();
    expect(readdirSync(join(repoRoot, 'config/schema')).sort()).toEqual([
      'keys.schema.json',
      'management-tokens.schema.json',
      'policy.schema.json',
    ]);
    expect(declaredSchema(join(repoRoot, 'config/routes.yaml'))).toBe(SCHEMA_FILES.policy);
    expect(declaredSchema(join(repoRoot, 'examples/demo-keys.yaml'))).toBe(SCHEMA_FILES.keys);
  });

  it.each([
    ['config/routes.yaml', 'policy'],
    ['test/fixtures/adversarial-policy.yaml', 'policy'],
    ['examples/demo-keys.yaml', 'keys'],
  ] as const)('%s is valid', (path, kind) => {
    if (kind === 'policy') expect(policyProblems(readFileSync(join(repoRoot, path), 'utf8'))).toEqual([]);
    else expect(keysProblems(readFileSync(join(repoRoot, path), 'utf8'))).toEqual([]);
  });

  it('the Kubernetes ConfigMap policy is valid', () => {
    const cm = parseAllDocuments(
      readFileSync(join(repoRoot, 'deploy/kubernetes/base/configmap.yaml'), 'utf8'),
    )[0]!.toJS() as { data: Record<string, string> };
    expect(policyProblems(cm.data['routes.yaml']!)).toEqual([]);
  });

  it('accept what keygate keys export writes, every field set (export → KEYGATE_KEYS_FILE round trip)', () => {
    const full = makeKey({
      apiKey: 'full',
      label: 'every field',
      expiresAt: '2030-01-01T00:00:00Z',
      allowIps: ['10.0.0.0/8'],
    });
    const record = {
      ...full,
      state: 'revoked' as const,
      revokedAt: '2026-01-01T00:00:00Z',
      revokeReason: 'lost',
      updatedAt: '2026-01-01T00:00:00Z',
      previousSecrets: [{ secret: 'old-secret-0123456789abc', validUntil: '2026-01-02T00:00:00Z' }],
    };
    const path = file(JSON.stringify({ keys: [toExternal(record)] }, null, 2), 'json');
    expect(loadKeysFile(path)).toEqual([record]);
  });

  // Each row: what is wrong, and the problem text expected. Today's wording is kept where Keygate's own checks
  // catch it; the schema adds what they never saw (typos in field names, shape of unknown things).
  it.each<[string, string, string[]]>([
    [
      'a misspelt field in a route (was ignored: the route needed no scope)',
      'routes:\n  - { method: GET, path: /api/v3/a, scope: [admin] }\n',
      ['routes[0].scope: unknown setting (not in the schema; a typo?)'],
    ],
    [
      'a misspelt top-level setting',
      'unlistedRoute: allow\n',
      ['unlistedRoute: unknown setting (not in the schema; a typo?)'],
    ],
    ['a list where a document belongs', '- GET /api/v3/a\n', ['must be object']],
    [
      "a lower-case method (once, in today's wording)",
      'routes:\n  - { method: get, path: /api/v3/a }\n',
      ['routes[0].method: must be an upper-case HTTP method, a list of them, or "*"'],
    ],
    [
      'a route outside /api/v3/',
      'routes:\n  - { method: GET, path: /v2/a }\n',
      ['routes[0].path: route /v2/a must start with /api/v3/'],
    ],
    [
      'a public catch-all under /api/v3/',
      'public:\n  - { method: GET, path: /api/v3/* }\n',
      [
        'public[0].path: public route /api/v3/* names no fixed segment after /api/v3/, so it would open every /api/v3/ path of its shape without authentication; list the public /api/v3/ routes one by one',
      ],
    ],
    [
      'a route without a path',
      'routes:\n  - { method: GET }\n',
      ['routes[0].path: must be a string starting with "/"'],
    ],
    [
      'a recv_window that is not a whole number',
      'maxRecvWindowSeconds: 1.5\n',
      ['maxRecvWindowSeconds must be an integer number of seconds between 1 and 3600'],
    ],
  ])('policy: %s', (_name, text, expected) => {
    expect(policyProblems(text)).toEqual(expected);
  });

  it.each<[string, string, string[]]>([
    [
      'a misspelt field (was ignored)',
      'keys:\n  - { apiKey: k, apiSecret: k-secret-0123456789ab, scope: [a] }\n',
      ['keys[0].scope: unknown setting (not in the schema; a typo?)'],
    ],
    [
      'a misspelt field in a previous secret',
      'keys:\n  - { apiKey: k, apiSecret: k-secret-0123456789ab, previousSecrets: [{ apiSecret: old-secret-0123456789, validUntil: 2030-01-01T00:00:00Z, until: x }] }\n',
      ['keys[0].previousSecrets[0].until: unknown setting (not in the schema; a typo?)'],
    ],
    [
      'no keys list',
      'key: []\n',
      ['keys: expected a top-level "keys" list', 'key: unknown setting (not in the schema; a typo?)'],
    ],
    [
      "a short secret (once, in today's wording)",
      'keys:\n  - { apiKey: k, apiSecret: short }\n',
      ['keys[0].apiSecret: must be at least 16 bytes'],
    ],
    [
      'a bad state',
      'keys:\n  - { apiKey: k, apiSecret: k-secret-0123456789ab, state: paused }\n',
      ['keys[0].state: must be "active" or "revoked"'],
    ],
  ])('keys: %s', (_name, text, expected) => {
    expect(keysProblems(text)).toEqual(expected);
  });

  it("reports every problem of a file at once: the schema's and Keygate's own", () => {
    const problems = policyProblems(
      'routes:\n  - { method: GET, path: /api/v3/a/../b, scopes: [x], note: hi }\ntrustedProxies: [300.0.0.1]\ndefaultRecvWindowSeconds: 90\nmaxRecvWindowSeconds: 60\n',
    );
    expect(problems).toEqual([
      'routes[0].path: bad segment ".." (use literals, :param, or a final *)',
      'trustedProxies: invalid IP or CIDR "300.0.0.1"',
      'defaultRecvWindowSeconds must not exceed maxRecvWindowSeconds',
      'routes[0].note: unknown setting (not in the schema; a typo?)',
    ]);
  });

  it('the schemas document every setting the code reads', () => {
    const policy = JSON.parse(readFileSync(SCHEMA_FILES.policy, 'utf8')) as {
      properties: Record<string, { description?: string }>;
    };
    for (const [name, prop] of Object.entries(policy.properties)) expect(prop.description, name).toMatch(/\S/);
    const text = readFileSync(join(repoRoot, 'config/routes.yaml'), 'utf8');
    const shipped = parseYaml(text) as Record<string, unknown>;
    // Every setting appears in the shipped file: set, or (when unset by default) as a commented example.
    const commented = [...text.matchAll(/^# ([A-Za-z]+): /gm)]
      .map((m) => m[1] as string)
      .filter((k) => k in policy.properties && !(k in shipped));
    expect(Object.keys(policy.properties).sort()).toEqual([...Object.keys(shipped), ...commented].sort());
  });
});
