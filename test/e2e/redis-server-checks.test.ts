import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { createOpenApiCheck, managementClient, writeTokensFile } from '../helpers/management.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { runKeygate } from '../helpers/spawn-keygate.js';
import { token } from '../helpers/tokens.js';

/**
 * Issue 46, items 2 and 4: Keygate reads the Redis it is given instead of trusting it. A
 * maxmemory-policy that may evict nonces refuses every request (/readyz redis_may_evict) unless
 * KEYGATE_ALLOW_EVICTING_REDIS=true; a Redis without AOF and KEYGATE_REDIS_MIN_REPLICAS=0 cannot
 * acknowledge a key change (503 not_durable, exit 1), since a crash reloads an older snapshot.
 */
const SECRET = 'server-checks-secret-0123456789';
const started: Array<{ close(): Promise<void> } | { stop(): Promise<void> }> = [];
let upstream: RecordingUpstream;

async function redisWith(options: Parameters<typeof startRedis>[0]): Promise<TestRedis> {
  const r = await startRedis(options);
  started.push(r);
  return r;
}

async function gateOn(redis: TestRedis, env: Record<string, string> = {}): Promise<RunningKeygate> {
  upstream ??= await startRecordingUpstream();
  const tokens = writeTokensFile([{ name: 'ops', access: 'write' }]);
  const gate = await startKeygate({
    upstream: upstream.url,
    redisUrl: redis.url,
    keys: [makeKey({ apiKey: 'k1', secret: SECRET })],
    env: { KEYGATE_MANAGEMENT_PORT: '0', KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file, ...env },
  });
  started.push(gate);
  Object.assign(gate, {
    ops: managementClient(gate.managementUrl as string, tokens.tokens.ops as string, createOpenApiCheck()),
  });
  return gate;
}
const opsOf = (gate: RunningKeygate) => (gate as RunningKeygate & { ops: ReturnType<typeof managementClient> }).ops;
const request = (gate: RunningKeygate) => send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('k1', SECRET)) });
const readyz = async (gate: RunningKeygate) => {
  const r = await send(gate.adminUrl, '/readyz');
  return [r.status, r.body] as const;
};
const metric = async (gate: RunningKeygate, name: string) =>
  Number(new RegExp(`^${name} (\\S+)$`, 'm').exec((await send(gate.adminUrl, '/metrics')).body)?.[1]);

/** Another application's writes with a TTL until Redis has evicted some: what a shared, full Redis does. */
async function fillUntilEvicted(url: string): Promise<number> {
  const c = new Redis(url);
  const value = 'x'.repeat(4_096);
  try {
    for (let round = 0; round < 200; round++) {
      const p = c.pipeline();
      for (let i = 0; i < 200; i++) p.set(`other-app:${round}:${i}`, value, 'EX', 3_600);
      await p.exec();
      const evicted = Number(/evicted_keys:(\d+)/.exec(await c.info('stats'))?.[1]);
      if (evicted > 0) return evicted;
    }
    throw new Error('nothing evicted');
  } finally {
    c.disconnect();
  }
}

afterEach(async () => {
  for (const s of started.splice(0).reverse()) await ('close' in s ? s.close() : s.stop());
});
afterAll(async () => {
  await upstream?.close();
});

describe('a Redis that may evict nonces (--maxmemory 8mb --maxmemory-policy volatile-lru)', () => {
  const EVICTING = ['--maxmemory', '8mb', '--maxmemory-policy', 'volatile-lru'];

  it('refuses every request and /readyz says redis_may_evict, with one line naming the policy and the fix', async () => {
    const redis = await redisWith({ args: EVICTING });
    const gate = await gateOn(redis);
    upstream.reset();
    expect(await readyz(gate)).toEqual([503, expect.stringContaining('"reason":"redis_may_evict"')]);
    const r = await request(gate);
    expect(r.status).toBe(503);
    expect(upstream.received).toEqual([]);
    const lines = gate.logs.filter((l) => l.includes('redis maxmemory-policy is volatile-lru'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('CONFIG SET maxmemory-policy noeviction');
    expect(lines[0]).toContain('KEYGATE_ALLOW_EVICTING_REDIS=true');
    expect(await metric(gate, 'keygate_redis_may_evict')).toBe(1);
    // Set right at runtime: served again at the next reading (every 5 s), no restart.
    const c = new Redis(redis.url);
    await c.config('SET', 'maxmemory-policy', 'noeviction');
    c.disconnect();
    await expect.poll(() => readyz(gate), { timeout: 20_000, interval: 250 }).toEqual([200, expect.any(String)]);
    expect((await request(gate)).status).toBe(200);
    expect(await metric(gate, 'keygate_redis_may_evict')).toBe(0);
  });

  it('reads INFO memory where CONFIG is disabled (as on managed services)', async () => {
    const redis = await redisWith({ args: [...EVICTING, '--rename-command', 'CONFIG', '""'] });
    const gate = await gateOn(redis);
    expect(await readyz(gate)).toEqual([503, expect.stringContaining('redis_may_evict')]);
    expect((await request(gate)).status).toBe(503);
  });

  it('with KEYGATE_ALLOW_EVICTING_REDIS=true: serves, warns once, and keygate_redis_evicted_keys follows another client filling it', async () => {
    const redis = await redisWith({ args: EVICTING });
    const gate = await gateOn(redis, { KEYGATE_ALLOW_EVICTING_REDIS: 'true' });
    expect((await request(gate)).status).toBe(200);
    expect(gate.logs.filter((l) => l.includes('KEYGATE_ALLOW_EVICTING_REDIS=true: an evicted nonce'))).toHaveLength(1);
    expect(await metric(gate, 'keygate_redis_may_evict')).toBe(1);
    const evicted = await fillUntilEvicted(redis.url);
    console.log(`[server-checks] another client's writes made Redis evict ${evicted} key(s) under 8 MB volatile-lru`);
    await expect
      .poll(() => metric(gate, 'keygate_redis_evicted_keys'), { timeout: 20_000, interval: 250 })
      .toBeGreaterThan(0);
  });
});

describe('key changes on one Redis without AOF (snapshots only) and KEYGATE_REDIS_MIN_REPLICAS=0', () => {
  const SNAPSHOT_ONLY = { persistence: 'none' as const, args: ['--save', '3600 1'] };

  it('are refused: the API answers 503 not_durable, keygate keys exits 1; requests are served', async () => {
    const redis = await redisWith(SNAPSHOT_ONLY);
    const gate = await gateOn(redis);
    expect((await request(gate)).status).toBe(200);
    const made = await opsOf(gate).call('POST', '/v1/keys', { json: { scopes: [] } });
    expect([made.status, made.body]).toEqual([503, expect.stringContaining('not_durable')]);
    const revoked = await opsOf(gate).call('POST', '/v1/keys/k1/revoke', { json: {} });
    expect(revoked.status).toBe(503);
    const cli = await runKeygate(['keys', 'revoke', 'k1'], { KEYGATE_REDIS_URL: redis.url }).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
    expect(cli.code).toBe(1);
    expect(cli.stderr).toContain('no AOF');
    expect(gate.logs.filter((l) => l.includes('redis has no AOF and KEYGATE_REDIS_MIN_REPLICAS is 0'))).toHaveLength(1);
    // Nothing was acknowledged, so nothing is undone: the key is still active.
    expect((await request(gate)).status).toBe(200);
  });

  it('with KEYGATE_ALLOW_VOLATILE_KEY_CHANGES=true a revoke is acknowledged, and a crash restarting from the dump undoes it', async () => {
    const redis = await redisWith(SNAPSHOT_ONLY);
    const gate = await gateOn(redis, { KEYGATE_ALLOW_VOLATILE_KEY_CHANGES: 'true' });
    await expect
      .poll(() =>
        gate.logs.some((l) => l.includes('KEYGATE_ALLOW_VOLATILE_KEY_CHANGES=true: an acknowledged key change')),
      )
      .toBe(true);
    const c = new Redis(redis.url);
    await c.save(); // the last snapshot: k1 active
    c.disconnect();
    await runKeygate(['keys', 'revoke', 'k1'], {
      KEYGATE_REDIS_URL: redis.url,
      KEYGATE_ALLOW_VOLATILE_KEY_CHANGES: 'true',
    });
    await expect.poll(async () => (await request(gate)).status, { timeout: 10_000 }).toBe(404);
    await redis.kill();
    await redis.start();
    await expect.poll(async () => (await request(gate)).status, { timeout: 20_000, interval: 250 }).toBe(200);
  });

  it('with AOF (the default of this suite’s servers) the revoke is acknowledged and survives the same crash', async () => {
    // 404 10013 is also the answer for a key that is gone: the state is read through the API at the end.
    const redis = await redisWith({});
    const gate = await gateOn(redis);
    await runKeygate(['keys', 'revoke', 'k1'], { KEYGATE_REDIS_URL: redis.url });
    expect((await request(gate)).status).toBe(404);
    // appendfsync everysec: a write is on disk within about a second.
    await new Promise((r) => setTimeout(r, 1_500));
    await redis.kill();
    await redis.start();
    await expect
      .poll(async () => (await request(gate).catch(() => ({ status: 0 }))).status, { timeout: 20_000, interval: 250 })
      .toBe(404);
    const shown = (await opsOf(gate).call('GET', '/v1/keys/k1')).json() as { state: string };
    expect(shown.state).toBe('revoked');
  });
});
