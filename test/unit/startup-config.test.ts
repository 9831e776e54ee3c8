import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { describeConfig, loadStartupConfig } from '../../src/cli/serve/startup-config.js';

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
