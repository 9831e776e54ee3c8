import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'node:http';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, send, type Reply } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { token } from '../helpers/tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

const SECRET = 'rate-limit-secret-0123456789';
const TOO_MANY = { code: 10429, message: 'Too Many Requests' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Two Keygate instances on one real Redis, real sockets, a recording upstream:
 * the limit is shared, decided on Redis's clock, and costs no extra round trip.
 */
describe('per-key rate limits across two instances', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let a: RunningKeygate;
  let b: RunningKeygate;
  let admin: Redis;

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    // The policy's default applies to keys without their own limit.
    const dir = mkdtempSync(join(tmpdir(), 'keygate-rl-'));
    const policy = join(dir, 'policy.yaml');
    writeFileSync(
      policy,
      `routes:\n  - { method: GET, path: ${ACCOUNTS_PATH}, scopes: [accounts:read] }\ndefaultRateLimit: { rate: 3/m }\n`,
    );
    const keys = [
      makeKey({ apiKey: 'ten', secret: SECRET, rateLimit: { rate: '10/s', burst: 10 } }),
      makeKey({ apiKey: 'forged', secret: SECRET, rateLimit: { rate: '10/m', burst: 10 } }),
      makeKey({ apiKey: 'usage', secret: SECRET, rateLimit: { rate: '5/s', burst: 5 } }),
      makeKey({ apiKey: 'slow', secret: SECRET, rateLimit: { rate: '30/m', burst: 1 } }),
      makeKey({ apiKey: 'by-default', secret: SECRET }),
      makeKey({ apiKey: 'plenty', secret: SECRET, rateLimit: { rate: '1000000/s' } }),
    ];
    const env = { KEYGATE_CONFIG: policy, KEYGATE_KEY_CACHE_TTL_MS: '600000' };
    a = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, keys, env });
    b = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      env: { ...env, KEYGATE_RATE_LIMIT_HEADERS: 'off' },
    });
    admin = new Redis(redis.url);
  });
  afterAll(async () => {
    admin?.disconnect();
    await a?.close();
    await b?.close();
    await upstream?.close();
    await redis?.stop();
  });

  const call = (gate: RunningKeygate, t: string) => send(gate.url, ACCOUNTS_PATH, { headers: bearer(t) });
  const forwardedFor = (apiKey: string) =>
    upstream.received.filter((r) => r.headers['x-api-key-id'] === `id-${apiKey}`).length;
  const expectLimited = (r: Reply) => {
    expect(r.status).toBe(429);
    expect(r.json()).toEqual(TOO_MANY);
    expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(r.headers['ratelimit-policy']).toBe('"keygate";q=10;w=1');
    expect(r.headers.ratelimit).toMatch(/^"keygate";r=0;t=1$/);
  };

  it('10/s burst 10: of 40 concurrent requests split across both instances exactly 10 pass; the rest are 429 10429 with Retry-After; the allowance returns', async () => {
    // GCRA gives one more request every 100 ms, so "exactly 10" holds only when all 40 reach Redis
    // within 100 ms. Connections are opened beforehand (keep-alive, GET /api/v3/time) so the burst
    // is not spread by 40 TCP handshakes; on a machine too loaded for that, the attempt is checked
    // against the bound GCRA promises (10 + one per 100 ms elapsed) and repeated.
    const agent = new Agent({ keepAlive: true, maxSockets: 40 });
    const get = (gate: RunningKeygate, path: string, headers: Record<string, string> = {}) =>
      send(gate.url, path, { headers, agent });
    let exact = false;
    for (let attempt = 0; attempt < 5 && !exact; attempt++) {
      await sleep(1_100); // the whole burst back
      await Promise.all(Array.from({ length: 40 }, (_, i) => get(i % 2 ? a : b, '/api/v3/time')));
      const before = forwardedFor('ten');
      const tokens = Array.from({ length: 40 }, () => token('ten', SECRET));
      const t0 = performance.now();
      const replies = await Promise.all(tokens.map((t, i) => get(i % 2 ? a : b, ACCOUNTS_PATH, bearer(t))));
      const elapsedMs = performance.now() - t0;
      const ok = replies.filter((r) => r.status === 200);
      for (const r of replies.filter((r) => r.status !== 200)) expectLimited(r);
      expect(forwardedFor('ten') - before).toBe(ok.length);
      // Instance a adds RateLimit to what it forwards; b has it switched off.
      const fromA = ok.filter((r) => r.headers.ratelimit !== undefined);
      for (const r of fromA) {
        expect(r.headers['ratelimit-policy']).toBe('"keygate";q=10;w=1');
        expect(r.headers.ratelimit).toMatch(/^"keygate";r=\d;t=1$/);
      }
      if (elapsedMs < 100) {
        expect(ok).toHaveLength(10);
        exact = true;
      } else {
        console.log(
          `burst spread over ${Math.round(elapsedMs)} ms (loaded machine): ${ok.length} passed, bound ${10 + Math.floor(elapsedMs / 100)}`,
        );
        expect(ok.length).toBeGreaterThanOrEqual(10);
        expect(ok.length).toBeLessThanOrEqual(10 + Math.floor(elapsedMs / 100));
      }
    }
    // Every attempt above was checked against what GCRA promises for its elapsed time; the exact count needs a burst
    // that reached Redis within 100 ms, which a loaded machine may never give. That is speed, not behaviour: say it.
    if (!exact)
      console.log('no burst of 40 completed within 100 ms: the exact count was not observed, the GCRA bound was');
    // After the interval the allowance is back: b (RateLimit switched off) and then a both pass.
    await sleep(1_100);
    const viaB = await get(b, ACCOUNTS_PATH, bearer(token('ten', SECRET)));
    const viaA = await get(a, ACCOUNTS_PATH, bearer(token('ten', SECRET)));
    agent.destroy();
    expect([viaB.status, viaA.status]).toEqual([200, 200]);
    expect(viaB.headers.ratelimit).toBeUndefined();
    expect(viaB.headers['ratelimit-policy']).toBeUndefined();
    expect(viaA.headers.ratelimit).toMatch(/^"keygate";r=[89];t=1$/);
  });

  it('a limited request records no nonce: the same token passes once allowed, and only then is a replay', async () => {
    // 'slow' allows one request every 2 s: the held token meets the spent allowance unless the machine takes 2 s
    // between two requests. Such an attempt says nothing about the nonce and is repeated (the behaviour is below).
    let held = '';
    for (let attempt = 0; ; attempt++) {
      await sleep(2_100);
      expect((await call(a, token('slow', SECRET))).status).toBe(200);
      held = token('slow', SECRET);
      const first = await call(b, held);
      if (first.status === 429 || attempt === 4) {
        expect([first.status, first.json()]).toEqual([429, TOO_MANY]);
        break;
      }
    }
    const forwarded = forwardedFor('slow');
    // A 429 spends nothing: the same token is answered 429 until the allowance is back, then 200, once.
    const onceAllowed = async (gate: RunningKeygate) => {
      for (;;) {
        const r = await call(gate, held);
        if (r.status !== 429) return r;
        await sleep(100);
      }
    };
    expect((await onceAllowed(a)).status).toBe(200);
    expect(forwardedFor('slow')).toBe(forwarded + 1);
    // The limit is checked first: a replay while the key is limited is answered 429 (nothing spent),
    // so the allowance is awaited again before the nonce shows as taken.
    expect((await onceAllowed(b)).json()).toEqual({ code: 40106, message: 'Invalid Token' });
    expect(forwardedFor('slow')).toBe(forwarded + 1);
  });

  it('a forged token spends no allowance', async () => {
    const forged = await Promise.all(
      Array.from({ length: 30 }, (_, i) => call(i % 2 ? a : b, token('forged', 'not-the-secret-0123456789'))),
    );
    expect(forged.every((r) => r.status === 401)).toBe(true);
    const good = await Promise.all(Array.from({ length: 10 }, (_, i) => call(i % 2 ? a : b, token('forged', SECRET))));
    expect(good.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect((await call(a, token('forged', SECRET))).status).toBe(429);
    expect(forwardedFor('forged')).toBe(10);
  });

  it("a key without its own limit gets the policy's defaultRateLimit", async () => {
    const replies = await Promise.all(
      Array.from({ length: 6 }, (_, i) => call(i % 2 ? a : b, token('by-default', SECRET))),
    );
    expect(replies.filter((r) => r.status === 200)).toHaveLength(3);
    const limited = replies.find((r) => r.status === 429) as Reply;
    expect(limited.headers['ratelimit-policy']).toBe('"keygate";q=3;w=60');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(15); // next one in ~20 s
  });

  it('usage counts equal the forwarded requests (replays, 429s and forgeries not counted)', async () => {
    const sent = Array.from({ length: 12 }, () => token('usage', SECRET));
    const t0 = performance.now();
    const replies = await Promise.all(sent.map((t, i) => call(i % 2 ? a : b, t)));
    const elapsedMs = performance.now() - t0;
    await call(a, sent[0] as string); // a replay
    await call(b, token('usage', 'wrong-secret-0123456789'));
    await b.keygate.store.flushUsage(); // b's counts reach Redis once a second; a flushes its own on read
    const usage = await a.keygate.store.getUsage('usage');
    const total = Object.values(usage.perDay).reduce((x, y) => x + y, 0);
    expect(total).toBe(replies.filter((r) => r.status === 200).length);
    expect(total).toBe(forwardedFor('usage'));
    // 5/s burst 5: exactly the burst, plus one per 200 ms the 12 requests took to reach Redis (GCRA's promise).
    expect(total).toBeGreaterThanOrEqual(5);
    expect(total).toBeLessThanOrEqual(5 + Math.floor(elapsedMs / 200));
    expect(Math.abs((usage.lastUsedAtMs as number) - Date.now())).toBeLessThan(5_000);
  });

  // A key without a limit costs the nonce's SET NX PX alone: test/e2e/redis-store.test.ts (this policy sets a default).
  it('one Redis round trip per forwarded request (INFO commandstats), usage in batches', async () => {
    const apiKey = 'plenty';
    // Warm both instances' key caches first (a cache miss adds a GET) and write their pending usage.
    for (const g of [a, b]) expect((await call(g, token(apiKey, SECRET))).status).toBe(200);
    await Promise.all([a.keygate.store.flushUsage(), b.keygate.store.flushUsage()]);
    await admin.config('RESETSTAT');
    const N = 40;
    const replies = await Promise.all(Array.from({ length: N }, (_, i) => call(i % 2 ? a : b, token(apiKey, SECRET))));
    expect(replies.every((r) => r.status === 200)).toBe(true);
    // Then exactly one usage write per instance (the timer may have written part of it already).
    await Promise.all([a.keygate.store.flushUsage(), b.keygate.store.flushUsage()]);
    const stats = parseCommandStats(await admin.info('commandstats'));
    delete stats['config|resetstat']; // our own RESETSTAT
    // The subscriber heartbeat, once a second per instance (subscriber-heartbeat.ts), not per request: a PUBLISH and,
    // in the same tick, the keystore epoch check (one EVALSHA running one GET). A slow run meets a few of them.
    const heartbeats = stats.publish ?? 0;
    delete stats.publish;
    console.log(`commandstats for ${N} forwarded requests (${apiKey}): ${JSON.stringify(stats)}`);
    // Usage: one EVALSHA per instance and flush that had counts, running HGET (batch mark and
    // last, and the outcome rings' slot at each granularity: minute, hour, day), HSET (mark, the three
    // slots, last) and one HINCRBY per day; never a command per request.
    const flushes = stats.hincrby ?? 0;
    expect(flushes).toBeGreaterThanOrEqual(2);
    expect(flushes).toBeLessThanOrEqual(6);
    // The request path: EVALSHA running TIME, GET (tat), SET NX PX (nonce) + SET PX (tat).
    const epochChecks = (stats.evalsha ?? 0) - N - flushes;
    expect(epochChecks).toBeGreaterThanOrEqual(Math.max(0, heartbeats - 1));
    expect(epochChecks).toBeLessThanOrEqual(heartbeats + 1);
    expect(stats).toEqual({
      evalsha: N + flushes + epochChecks,
      time: N,
      get: N + epochChecks,
      set: 2 * N,
      hget: 5 * flushes,
      hset: stats.hset,
      hincrby: flushes,
    });
    expect(stats.hset).toBeGreaterThanOrEqual(4 * flushes); // the mark, the slots, and "last" when it moved forward
    expect(stats.hset).toBeLessThanOrEqual(5 * flushes);
  });

  it("Redis layout: one key's request-path state shares a hash tag; nothing under the old nonce names", async () => {
    await Promise.all([a.keygate.store.flushUsage(), b.keygate.store.flushUsage()]);
    // The GCRA state lives only until the allowance is full again (at most 1 s for 5/s burst 5): on a
    // loaded machine the earlier tests' requests can be older than that, so spend the burst now.
    await Promise.all(Array.from({ length: 5 }, () => call(a, token('usage', SECRET))));
    const names = (await admin.keys('*'))
      .filter((k) => k.includes('{usage}'))
      .map((k) => k.replace(/:nonce:\d+$/, ':nonce:<n>'));
    expect(new Set(names)).toEqual(
      new Set([
        'keygate:{usage}:nonce:<n>',
        'keygate:{usage}:budget',
        'keygate:{usage}:usage',
        'keygate:{usage}:outcomes',
      ]),
    );
    expect(await admin.keys('keygate:nonce:*')).toEqual([]);
  });
});

function parseCommandStats(info: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1] as string] = Number(m[2]);
  return out;
}
