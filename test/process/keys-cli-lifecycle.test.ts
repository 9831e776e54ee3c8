import { randomBytes } from 'node:crypto';
import { lstatSync, mkdtempSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { bearer, send } from '../helpers/http.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { ACCOUNTS_PATH as PATH, LONG_CACHE_TTL_MS, PUBLISHED_WITHIN } from '../helpers/constants.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { runKeygate } from '../helpers/spawn-keygate.js';
import { token } from '../helpers/tokens.js';

const ENC = randomBytes(32).toString('base64');
const ENC_NEXT = randomBytes(32).toString('hex');

describe('key lifecycle through the CLI, seen by two running instances', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let a: RunningKeygate;
  let b: RunningKeygate;
  let env: Record<string, string>;
  const cli = async (...args: string[]) => (await runKeygate(['keys', ...args], env)).stdout;
  const status = async (gate: RunningKeygate, k: string, s: string) =>
    (await send(gate.url, PATH, { headers: bearer(token(k, s)) })).status;

  beforeAll(async () => {
    redis = await startRedis({ shared: true });
    await redis.flush();
    env = { KEYGATE_REDIS_URL: redis.url, KEYGATE_SECRET_ENCRYPTION_KEY: ENC, KEYGATE_ACTOR: 'test-operator' };
    upstream = await startRecordingUpstream();
    const gateEnv = { KEYGATE_KEY_CACHE_TTL_MS: String(LONG_CACHE_TTL_MS), KEYGATE_SECRET_ENCRYPTION_KEY: ENC };
    a = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env: gateEnv });
    b = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env: gateEnv });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await upstream?.close();
    await redis?.stop();
  });

  it('create, update, rotate, revoke: every change reaches both instances long before their cache expires', async () => {
    const created = JSON.parse(
      await cli('create', '--scopes', 'accounts:read', '--label', 'lifecycle', '--ttl', '30d', '--json'),
    ) as { apiKey: string; apiSecret: string; expiresAt: string };
    expect(Date.parse(created.expiresAt) - Date.now()).toBeGreaterThan(29 * 86_400_000);
    expect(await status(a, created.apiKey, created.apiSecret)).toBe(200);
    expect(await status(b, created.apiKey, created.apiSecret)).toBe(200);

    await cli('update', created.apiKey, '--scopes', 'other:read');
    for (const g of [a, b])
      await expect.poll(() => status(g, created.apiKey, created.apiSecret), PUBLISHED_WITHIN).toBe(403);
    await cli('update', created.apiKey, '--scopes', 'accounts:read,other:read');
    for (const g of [a, b])
      await expect.poll(() => status(g, created.apiKey, created.apiSecret), PUBLISHED_WITHIN).toBe(200);

    const rotated = JSON.parse(await cli('rotate', created.apiKey, '--grace', '60s', '--json')) as {
      apiSecret: string;
      previousSecretValidUntil: string;
    };
    expect(rotated.apiSecret).not.toBe(created.apiSecret);
    for (const g of [a, b]) {
      await expect.poll(() => status(g, created.apiKey, rotated.apiSecret), PUBLISHED_WITHIN).toBe(200);
      expect(await status(g, created.apiKey, created.apiSecret)).toBe(200); // grace
    }
    await cli('rotate', created.apiKey, '--grace', '0');
    for (const g of [a, b])
      await expect.poll(() => status(g, created.apiKey, rotated.apiSecret), PUBLISHED_WITHIN).toBe(401);

    await cli('revoke', created.apiKey, '--reason', 'offboarded');
    const table = await cli('list', '--state', 'revoked');
    expect(table).toMatch(/STATUS/);
    expect(table).toContain(created.apiKey);
    expect(table).toContain('offboarded');
    expect(await cli('list', '--state', 'active')).not.toContain(created.apiKey);

    const raw = new Redis(redis.url);
    const entries = (await raw.xrange('keygate:{keystore}:audit', '-', '+')).map(
      ([, fields]) => JSON.parse(fields[1] as string) as { action: string; actor: string; apiKey: string },
    );
    const stored = await raw.hget(`keygate:{keystore}:key:${created.apiKey}`, 'json');
    raw.disconnect();
    expect(entries.filter((e) => e.apiKey === created.apiKey).map((e) => e.action)).toEqual([
      'create',
      'update',
      'update',
      'rotate',
      'rotate',
      'revoke',
    ]);
    expect(entries.every((e) => e.actor === 'test-operator')).toBe(true);
    expect(JSON.stringify(entries)).not.toContain(created.apiSecret);
    expect(stored).not.toContain(created.apiSecret);
  });

  it('rate limits and usage: create/update --rate-limit/--burst, keys usage, keys list --sort last-used', async () => {
    // 3/h gives one request back every 20 minutes, so no run of this test is slow enough to refill the bucket
    // between the requests counted below (3/m gave one back every 20 s, which a loaded machine can reach).
    const limited = JSON.parse(
      await cli('create', '--scopes', 'accounts:read', '--label', 'limited', '--rate-limit', '3/h', '--json'),
    ) as { apiKey: string; apiSecret: string; rateLimit: unknown };
    expect(limited.rateLimit).toEqual({ rate: '3/h' });
    const idle = JSON.parse(await cli('create', '--scopes', 'accounts:read', '--label', 'idle', '--json')) as {
      apiKey: string;
    };
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push(await status(i % 2 ? a : b, limited.apiKey, limited.apiSecret));
    expect(statuses).toEqual([200, 200, 200, 429, 429]);

    type Usage = { total: number; lastUsedAt: string; perDay: Array<{ day: string; requests: number }> };
    const readUsage = async () => JSON.parse(await cli('usage', limited.apiKey, '--days', '7', '--json')) as Usage;
    // The serving instances write what they counted once a second.
    await expect.poll(async () => (await readUsage()).total, { timeout: 10_000 }).toBe(3);
    const usage = await readUsage();
    expect(usage.total).toBe(3);
    expect(usage.perDay).toHaveLength(7);
    // Issue 42: the cost spent beside the requests (the default route costs 1 per request).
    expect(usage.perDay.at(-1)).toEqual({ day: new Date().toISOString().slice(0, 10), requests: 3, cost: 3 });
    expect(Math.abs(Date.parse(usage.lastUsedAt) - Date.now())).toBeLessThan(10_000);
    const human = await cli('usage', limited.apiKey, '--days', '7');
    console.log(`$ keygate keys usage ${limited.apiKey} --days 7\n${human}`);
    expect(human).toContain('requests, last 7 days (UTC): 3');
    await expect(cli('usage', limited.apiKey, '--days', '36')).rejects.toMatchObject({ code: 2 });

    const table = await cli('list', '--sort', 'last-used');
    console.log(`$ keygate keys list --sort last-used\n${table}`);
    const lines = table.split('\n');
    expect(lines[0]).toMatch(/RATE LIMIT\s+LAST USED/);
    const row = (k: string) => lines.findIndex((l) => l.startsWith(k));
    expect(lines[row(idle.apiKey)]).toMatch(/ - +never /);
    expect(lines[row(limited.apiKey)]).toContain(' 3/h ');
    expect(row(idle.apiKey)).toBeLessThan(row(limited.apiKey)); // never used first: the candidates for revocation
    const listed = JSON.parse(await cli('list', '--sort', 'last-used', '--json')) as Array<{
      apiKey: string;
      lastUsedAt: string | null;
    }>;
    expect(listed.at(-1)?.apiKey).toBe(limited.apiKey);

    await cli('update', limited.apiKey, '--burst', '5');
    expect(JSON.parse(await cli('show', limited.apiKey))).toMatchObject({
      rateLimit: { rate: '3/h', burst: 5 },
      lastUsedAt: usage.lastUsedAt,
    });
    // The new burst applies at once on both instances (the change is published): 2 more fit.
    await expect.poll(() => status(a, limited.apiKey, limited.apiSecret), PUBLISHED_WITHIN).toBe(200);
    expect(await status(b, limited.apiKey, limited.apiSecret)).toBe(200);
    expect(await status(a, limited.apiKey, limited.apiSecret)).toBe(429);
    await cli('update', limited.apiKey, '--rate-limit', 'none');
    expect(JSON.parse(await cli('show', limited.apiKey))).not.toHaveProperty('rateLimit');
    for (const g of [a, b])
      await expect.poll(() => status(g, limited.apiKey, limited.apiSecret), PUBLISHED_WITHIN).toBe(200);
    await expect(cli('update', limited.apiKey, '--rate-limit', '10/d')).rejects.toMatchObject({ code: 2 });
    await expect(cli('create', '--burst', '3')).rejects.toMatchObject({ code: 2 });
  });

  it('exports without secrets by default, and moves keys from a keys file into Redis', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keygate-export-'));
    const file = join(dir, 'keys.yaml');
    writeFileSync(
      file,
      'keys:\n  - { apiKey: imported-1, apiSecret: imported-secret-0123456789, id: imp1, scopes: [accounts:read] }\n  - { apiKey: imported-2, apiSecret: imported-secret-9876543210, scopes: [] }\n',
    );
    expect(await cli('import', file)).toContain('imported 2 new');
    expect(await cli('import', file)).toContain('skipped 2');
    await expect.poll(() => status(a, 'imported-1', 'imported-secret-0123456789'), PUBLISHED_WITHIN).toBe(200);

    const plain = await cli('export');
    expect(plain).toContain('imported-1');
    expect(plain).not.toContain('imported-secret-0123456789');
    const out = join(dir, 'with.json');
    await cli('export', '--with-secrets', '--out', out);
    const exported = JSON.parse(readFileSync(out, 'utf8')) as { keys: Array<{ apiKey: string; apiSecret: string }> };
    expect(exported.keys.find((k) => k.apiKey === 'imported-1')?.apiSecret).toBe('imported-secret-0123456789');

    const broken = join(dir, 'broken.yaml');
    writeFileSync(broken, 'keys:\n  - { apiKey: fine-key, apiSecret: fine-secret-0123456789 }\n  - { apiKey: x }\n');
    await expect(cli('import', broken)).rejects.toMatchObject({ code: 2 });
    expect(await cli('list', '--json')).not.toContain('fine-key'); // all or nothing
  });

  it.each([
    ['a new file', (_dir: string, out: string) => out],
    [
      'an existing world-readable file',
      (_dir: string, out: string) => (writeFileSync(out, 'old\n', { mode: 0o644 }), out),
    ],
    [
      'a symlink to another file',
      (dir: string, out: string) => (
        writeFileSync(join(dir, 'victim'), 'untouched\n', { mode: 0o644 }),
        symlinkSync(join(dir, 'victim'), out),
        out
      ),
    ],
  ])('export --with-secrets --out into %s leaves a regular 0600 file and follows no link', async (name, prepare) => {
    const dir = mkdtempSync(join(tmpdir(), 'keygate-export-mode-'));
    const out = prepare(dir, join(dir, 'keys.yaml'));
    await cli('export', '--with-secrets', '--out', out);
    const st = lstatSync(out);
    expect(st.isFile()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
    expect(readFileSync(out, 'utf8')).toContain('imported-secret-0123456789');
    if (name.includes('symlink')) {
      expect(readFileSync(join(dir, 'victim'), 'utf8')).toBe('untouched\n');
      expect(statSync(join(dir, 'victim')).mode & 0o777).toBe(0o644);
    }
  });

  it('re-seals every secret with a new encryption key', async () => {
    const before = JSON.parse(await cli('create', '--scopes', 'accounts:read', '--json')) as {
      apiKey: string;
      apiSecret: string;
    };
    env = { ...env, KEYGATE_SECRET_ENCRYPTION_KEY: ENC_NEXT, KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS: ENC };
    expect(await cli('reencrypt')).toMatch(/re-sealed \d+ keys/);
    // Now only the new key opens the secrets: the old key alone fails closed (503), the new one works.
    const oldOnly = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      env: { KEYGATE_SECRET_ENCRYPTION_KEY: ENC },
    });
    const newOnly = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      env: { KEYGATE_SECRET_ENCRYPTION_KEY: ENC_NEXT },
    });
    try {
      expect(await status(oldOnly, before.apiKey, before.apiSecret)).toBe(503);
      expect(await status(newOnly, before.apiKey, before.apiSecret)).toBe(200);
    } finally {
      await oldOnly.close();
      await newOnly.close();
    }
  });
});
