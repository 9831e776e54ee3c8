import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { ConfigError } from '../../src/files/config-error.js';
import { KeysFileError, parseKeysDocument } from '../../src/keys/keys-file.js';

const file = (name: string, text: string) => {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-cfg-'));
  writeFileSync(join(dir, name), text);
  return join(dir, name);
};

describe('config', () => {
  it('has safe defaults and the shipped routes file', () => {
    const c = loadConfig({ KEYGATE_UPSTREAM: 'http://127.0.0.1:3000' });
    expect(c.port).toBe(8000);
    expect(c.adminPort).toBe(9090);
    expect(c.policy.unlistedRoutes).toBe('deny');
    expect(c.policy.trustedProxies).toBeNull();
    expect(c.policy.maxRecvWindowSeconds).toBe(60);
    expect(c.policy.routes.rules.map((r) => [r.pattern, r.scopes])).toEqual([
      ['/api/v3/viewer/accounts', ['accounts:read']],
    ]);
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.limits)).toBe(true);
  });

  it('reports every problem at once', () => {
    const policy = file(
      'p.yaml',
      'routes:\n  - { method: get, path: /x/../y, scopes: [1] }\npublic:\n  - { method: GET, path: /api/v3/* }\nunlistedRoutes: maybe\ntrustedProxies: [300.0.0.1]\nmaxRecvWindowSeconds: 0\ntypo: 1\n',
    );
    try {
      loadConfig({ KEYGATE_UPSTREAM: 'http://x/base', KEYGATE_PORT: '9090', KEYGATE_CONFIG: policy });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const problems = (err as ConfigError).problems.join('\n');
      for (const needle of [
        'KEYGATE_UPSTREAM',
        'KEYGATE_ADMIN_PORT',
        'method',
        'bad segment',
        'scopes',
        'public route',
        'unlistedRoutes',
        'trustedProxies',
        'maxRecvWindowSeconds',
        'typo',
      ]) {
        expect(problems).toContain(needle);
      }
    }
  });

  it('validates keys files, listing every problem', () => {
    expect(() =>
      parseKeysDocument(
        {
          keys: [
            { apiKey: 'a', apiSecret: 'short' },
            { apiKey: 'a', apiSecret: 'long-enough-secret-123', allowIps: ['nope'] },
          ],
        },
        'k.yaml',
      ),
    ).toThrow(KeysFileError);
    try {
      parseKeysDocument(
        {
          keys: [
            { apiKey: 'a', apiSecret: 'short' },
            { apiKey: 'b c', apiSecret: 'long-enough-secret-123', allowIps: ['nope'] },
          ],
        },
        'k.yaml',
      );
    } catch (err) {
      const p = (err as KeysFileError).problems.join('\n');
      expect(p).toContain('keys[0].apiSecret');
      expect(p).toContain('keys[1].apiKey');
      expect(p).toContain('keys[1].allowIps');
    }
  });
});
