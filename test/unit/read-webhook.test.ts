import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  describeWebhook,
  readWebhook,
  WEBHOOK_RETRY_DELAYS_MS,
  WEBHOOK_RETRY_FOR_MS,
} from '../../src/config/read-webhook.js';
import type { RedisConnection } from '../../src/config/redis-settings.js';

const REDIS: RedisConnection = { mode: 'standalone', url: 'redis://127.0.0.1:6379' };
const KEY = Buffer.alloc(32, 7);
const SECRET = `whsec_${KEY.toString('base64')}`;

const read = (env: Record<string, string>, redis: RedisConnection | null = REDIS) => {
  const problems: string[] = [];
  return { settings: readWebhook(env, redis ?? undefined, problems), problems };
};

describe('readWebhook', () => {
  it('is off without KEYGATE_WEBHOOK_URL', () => {
    expect(read({})).toEqual({ settings: undefined, problems: [] });
  });

  it('reads the URL, the whsec_ secret (its bytes are the key) and the timeout', () => {
    const { settings, problems } = read({
      KEYGATE_WEBHOOK_URL: 'https://hooks.example.com/keygate',
      KEYGATE_WEBHOOK_SECRET: SECRET,
      KEYGATE_WEBHOOK_TIMEOUT_MS: '2500',
    });
    expect(problems).toEqual([]);
    expect(settings?.url.href).toBe('https://hooks.example.com/keygate');
    expect(Buffer.from(settings!.signingKey)).toEqual(KEY);
    expect(settings?.timeoutMs).toBe(2500);
  });

  it('reads the secret from KEYGATE_WEBHOOK_SECRET_FILE', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'keygate-whsec-')), 'secret');
    writeFileSync(file, `${SECRET}\n`);
    const { settings, problems } = read({ KEYGATE_WEBHOOK_URL: 'http://h/x', KEYGATE_WEBHOOK_SECRET_FILE: file });
    expect(problems).toEqual([]);
    expect(Buffer.from(settings!.signingKey)).toEqual(KEY);
  });

  it('reports every problem together, never quoting the secret', () => {
    const bad = 'whsec_not*base64';
    const { settings, problems } = read(
      { KEYGATE_WEBHOOK_URL: 'ftp://h/x', KEYGATE_WEBHOOK_SECRET: bad, KEYGATE_WEBHOOK_TIMEOUT_MS: '5' },
      null,
    );
    expect(settings).toBeUndefined();
    expect(problems).toEqual([
      'KEYGATE_WEBHOOK_TIMEOUT_MS: must be an integer between 100 and 60000, got "5"',
      'KEYGATE_WEBHOOK_URL: must start with http:// or https://, got ftp:',
      'KEYGATE_WEBHOOK_URL needs KEYGATE_REDIS_URL (or KEYGATE_REDIS_SENTINELS, KEYGATE_REDIS_CLUSTER_NODES): deliveries and their retries are kept in Redis, where another instance can finish them',
      'KEYGATE_WEBHOOK_SECRET: must be whsec_ followed by base64 (a Standard Webhooks secret)',
    ]);
    expect(problems.join('\n')).not.toContain('not*base64');
  });

  it.each([
    ['no whsec_ prefix', KEY.toString('base64'), 'must be whsec_ followed by base64 (a Standard Webhooks secret)'],
    ['too short', `whsec_${Buffer.alloc(16).toString('base64')}`, 'must encode 24 to 64 bytes, got 16'],
    ['too long', `whsec_${Buffer.alloc(65).toString('base64')}`, 'must encode 24 to 64 bytes, got 65'],
  ])('refuses a secret with %s', (_what, secret, problem) => {
    const { problems } = read({ KEYGATE_WEBHOOK_URL: 'http://h/x', KEYGATE_WEBHOOK_SECRET: secret });
    expect(problems).toEqual([`KEYGATE_WEBHOOK_SECRET: ${problem}`]);
  });

  it('requires the secret with the URL, and the URL with the secret', () => {
    expect(read({ KEYGATE_WEBHOOK_URL: 'http://h/x' }).problems).toEqual([
      'KEYGATE_WEBHOOK_SECRET (or KEYGATE_WEBHOOK_SECRET_FILE): required with KEYGATE_WEBHOOK_URL (a Standard Webhooks secret, whsec_ and the base64 of 24 to 64 random bytes)',
    ]);
    expect(read({ KEYGATE_WEBHOOK_SECRET: SECRET }).problems).toEqual([
      'KEYGATE_WEBHOOK_SECRET: set, but KEYGATE_WEBHOOK_URL is not (the receiver the events go to)',
    ]);
  });

  it.each([
    ['user and password', 'https://user:pa55@hooks.example.com/k', 'https://hooks.example.com/k', ['user', 'pa55']],
    [
      'a named credential',
      'https://hooks.example.com/k?token=t0k&x=1',
      'https://hooks.example.com/k?token=***&x=***',
      ['t0k'],
    ],
    // Azure Functions takes its function key as ?code=: no name list knows every such parameter.
    [
      'an unnamed credential',
      'https://fn.azurewebsites.net/api/hook?code=AbC123xyz==',
      'https://fn.azurewebsites.net/api/hook?code=***',
      ['AbC123xyz'],
    ],
    [
      'a port, repeated names',
      'http://10.0.0.5:8080/a/b?clientId=c1&clientId=c2',
      'http://10.0.0.5:8080/a/b?clientId=***&clientId=***',
      ['c1', 'c2'],
    ],
    ['no query', 'http://h/x', 'http://h/x', []],
  ])('describes the receiver as scheme, host and path, every query value masked: %s', (_what, url, shown, hidden) => {
    const { settings } = read({ KEYGATE_WEBHOOK_URL: url, KEYGATE_WEBHOOK_SECRET: SECRET });
    const text = JSON.stringify(describeWebhook(settings));
    expect(text).toBe(JSON.stringify({ url: shown, timeoutMs: 10_000 }));
    for (const h of hidden) expect(text).not.toContain(h);
    expect(text).not.toContain(SECRET.slice(6, 20));
  });

  it('describes nothing when webhooks are off', () => {
    expect(describeWebhook(undefined)).toBeUndefined();
  });

  it('retries within 10 s first, then with backoff, for at least 24 h', () => {
    expect(WEBHOOK_RETRY_DELAYS_MS[0]).toBeLessThanOrEqual(10_000);
    for (let i = 1; i < WEBHOOK_RETRY_DELAYS_MS.length; i++)
      expect(WEBHOOK_RETRY_DELAYS_MS[i]).toBeGreaterThan(WEBHOOK_RETRY_DELAYS_MS[i - 1]!);
    expect(WEBHOOK_RETRY_FOR_MS).toBeGreaterThanOrEqual(24 * 3_600_000);
  });
});
