import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { describeConfig, loadStartupConfig } from '../../src/cli/serve/startup-config.js';
import { writeTokensFile } from '../helpers/management.js';

const dir = mkdtempSync(join(tmpdir(), 'keygate-serve-'));
const keysFile = (name: string, text: string) => {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
};
const SECRET = 'never-shown-secret-0123456789';

describe('loadStartupConfig', () => {
  it.each<[string, Record<string, string>, string[] | undefined]>([
    [
      'a keys file: its records, read once, for serve to use',
      {
        KEYGATE_KEYS_FILE: keysFile(
          'k.yaml',
          `keys:\n  - apiKey: a\n    apiSecret: ${SECRET}\n  - apiKey: b\n    apiSecret: ${SECRET}\n`,
        ),
      },
      ['a', 'b'],
    ],
    ['no keys file: no records', {}, undefined],
    [
      'Redis mode: the keys file is not read',
      { KEYGATE_KEYS_FILE: join(dir, 'missing.yaml'), KEYGATE_REDIS_URL: 'redis://127.0.0.1:6379' },
      undefined,
    ],
  ])('%s', (_name, env, apiKeys) => {
    const { config, keys, problems } = loadStartupConfig({ KEYGATE_UPSTREAM: 'http://127.0.0.1:3000', ...env });
    expect(problems).toEqual([]);
    expect(config).toBeDefined();
    expect(keys?.map((r) => r.apiKey)).toEqual(apiKeys);
  });

  it('a broken keys file: every problem, no records, no secret', () => {
    const file = keysFile(
      'bad.yaml',
      `keys:\n  - apiKey: a\n    apiSecret: ${SECRET}\n  - apiKey: a\n    apiSecret: short\n`,
    );
    const { config, keys, problems } = loadStartupConfig({
      KEYGATE_UPSTREAM: 'http://127.0.0.1:3000',
      KEYGATE_KEYS_FILE: file,
    });
    expect(config).toBeUndefined();
    expect(keys).toBeUndefined();
    expect(problems).toEqual([`KEYGATE_KEYS_FILE: ${file}: keys[1].apiSecret: must be at least 16 bytes`]);
    expect(problems.join('\n')).not.toContain(SECRET);
  });
});

describe('describeConfig: metering', () => {
  const ROUTES = 'routes:\n  - { method: GET, path: /api/v3/a, scopes: [s] }\n';
  it.each<[string, string, Record<string, unknown>]>([
    [
      'none set: no budgets, failed-auth limit off, no route costs',
      ROUTES,
      { defaultRateLimit: 'none', defaultOwnerRateLimit: 'none', failedAuthLimit: 'off', routeCosts: {} },
    ],
    [
      'every budget as written, and only the routes whose cost is not 1',
      'defaultRateLimit: { rate: 100/s, burst: 200 }\ndefaultOwnerRateLimit: { rate: 6000/m }\n' +
        'failedAuthLimit: { rate: 10/m }\nroutes:\n  - { method: GET, path: /api/v3/a, scopes: [s] }\n' +
        '  - { method: POST, path: /api/v3/export, scopes: [s], cost: 10 }\n' +
        '  - { method: GET, path: /api/v3/one, scopes: [s], cost: 1 }\n',
      {
        defaultRateLimit: '100/s burst 200',
        defaultOwnerRateLimit: '6000/m',
        failedAuthLimit: '10/m',
        routeCosts: { 'POST /api/v3/export': 10 },
      },
    ],
  ])('%s', (name, policy, metering) => {
    const { config, problems } = loadStartupConfig({
      KEYGATE_UPSTREAM: 'http://127.0.0.1:3000',
      KEYGATE_CONFIG: keysFile(`policy-${name.length}.yaml`, policy),
      KEYGATE_KEYS_FILE: keysFile('m.yaml', `keys:\n  - apiKey: a\n    apiSecret: ${SECRET}\n`),
    });
    expect(problems).toEqual([]);
    const described = describeConfig(config!);
    expect(described.metering).toEqual(metering);
    expect(JSON.stringify(described)).not.toContain(SECRET);
  });
});

describe('the start line says whether GitHub secret scanning is on, and where', () => {
  const githubKeys = keysFile(
    'github-keys.json',
    JSON.stringify({
      public_keys: [
        {
          key_identifier: 'bcb53661c06b4728e59d897fb6165d5c9cda0fd9cdf9d09ead458168deb7518c',
          key: generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).publicKey.export({
            type: 'spki',
            format: 'pem',
          }),
          is_current: true,
        },
      ],
    }),
  );
  const tokens = writeTokensFile([{ name: 'backend', access: 'write' }]).file;
  const base = { KEYGATE_UPSTREAM: 'http://127.0.0.1:3000', KEYGATE_REDIS_URL: 'redis://127.0.0.1:6379' };
  it.each<[string, Record<string, string>, unknown]>([
    ['off', {}, 'off'],
    [
      'on a listener of its own',
      { KEYGATE_GITHUB_SCANNING_KEYS_FILE: githubKeys, KEYGATE_SCANNING_PORT: '9444' },
      { path: '/v1/secret-scanning/github', listener: 'own', host: '0.0.0.0', port: 9444, keysFile: githubKeys },
    ],
    [
      'on the management port (no KEYGATE_SCANNING_PORT)',
      {
        KEYGATE_GITHUB_SCANNING_KEYS_FILE: githubKeys,
        KEYGATE_MANAGEMENT_PORT: '9091',
        KEYGATE_MANAGEMENT_TOKENS_FILE: tokens,
      },
      { path: '/v1/secret-scanning/github', listener: 'management', port: 9091, keysFile: githubKeys },
    ],
  ])('%s', (_name, env, shown) => {
    const { config, problems } = loadStartupConfig({ ...base, ...env });
    expect(problems).toEqual([]);
    expect(describeConfig(config!).secretScanning).toEqual(shown);
  });

  it('KEYGATE_SCANNING_PORT without the keys file, or on a port already taken, is refused with why', () => {
    expect(loadStartupConfig({ ...base, KEYGATE_SCANNING_PORT: '9444' }).problems).toEqual([
      'KEYGATE_SCANNING_PORT: set, but KEYGATE_GITHUB_SCANNING_KEYS_FILE is not (the listener serves only GitHub secret scanning reports)',
    ]);
    expect(
      loadStartupConfig({
        ...base,
        KEYGATE_PORT: '9444',
        KEYGATE_SCANNING_PORT: '9444',
        KEYGATE_GITHUB_SCANNING_KEYS_FILE: githubKeys,
      }).problems,
    ).toEqual([
      'KEYGATE_SCANNING_PORT: must differ from KEYGATE_PORT, KEYGATE_ADMIN_PORT and KEYGATE_MANAGEMENT_PORT (it is published to GitHub on its own)',
    ]);
  });
});

describe('describeConfig: the start line and check-config', () => {
  it('shows the webhook receiver as scheme, host and path, every query value masked', () => {
    const { config } = loadStartupConfig({
      KEYGATE_UPSTREAM: 'http://127.0.0.1:3000',
      KEYGATE_REDIS_URL: 'redis://127.0.0.1:6379',
      KEYGATE_WEBHOOK_URL: 'https://u:pw@fn.azurewebsites.net/api/hook?code=FunctionKey0123&x=1',
      KEYGATE_WEBHOOK_SECRET: `whsec_${Buffer.alloc(32, 3).toString('base64')}`,
    });
    const shown = JSON.stringify(describeConfig(config!));
    expect(describeConfig(config!).webhooks).toEqual({
      url: 'https://fn.azurewebsites.net/api/hook?code=***&x=***',
      timeoutMs: 10_000,
    });
    for (const hidden of ['FunctionKey0123', 'u:pw', Buffer.alloc(32, 3).toString('base64')])
      expect(shown).not.toContain(hidden);
  });
});
