import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRedisKeyStore } from '../../src/cli/keys/open-key-store.js';
import { manualClock } from '../../src/clock.js';
import {
  bucketOf,
  CREDITS_EXHAUSTED,
  FORWARDED,
  GRANULARITIES,
  OTHER_REFUSAL,
  outcomeReport,
  RATE_LIMITED,
  REPLAYED,
  RING_SLOTS,
  RINGS,
  type Granularity,
  type Outcome,
} from '../../src/keys/outcome-usage.js';
import { createMemoryStore } from '../../src/store/memory/memory-store.js';
import { createRedisStore } from '../../src/store/redis/redis-store.js';
import type { Store, UsageSubject } from '../../src/store/store.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, waitStoreReady, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { managementClient, writeTokensFile, type ManagementClient } from '../helpers/management.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { guard } from '../helpers/slowdown.js';
import { token } from '../helpers/tokens.js';
import { runCli } from '../helpers/cli-run.js';

/**
 * Usage by outcome (src/keys/outcome-usage.ts): counted per key and per owner in rings of minutes, hours and
 * days, by both stores (a manual clock puts counts on either side of a bucket boundary), bounded in size
 * however long a key is used, and over the wire: only requests whose signature verified count, the
 * management API's answers match the OpenAPI document, and the CLI reads the same report.
 */
let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

/** 23:59:59.999 UTC: the next millisecond starts a new minute, hour and day. */
const T = Date.UTC(2026, 10, 28, 23, 59, 59, 999);
const MINUTE = 60_000;
const ZERO = { forwarded: 0, replay: 0, rate_limited: 0, credits_exhausted: 0, other_refusals: 0 };

type Opened = { store: Store; clock: ReturnType<typeof manualClock>; close(): Promise<void> };
const stores: Record<string, () => Promise<Opened>> = {
  memory: async () => {
    const clock = manualClock(T);
    const store = createMemoryStore({}, { clock });
    return { store, clock, close: () => store.close() };
  },
  redis: async () => {
    await redis.flush();
    const clock = manualClock(T);
    // Written only when a read flushes (or at close): the test decides when batches go.
    const store = createRedisStore(
      { url: redis.url, usageFlushMs: 3_600_000 },
      { logger: pino({ level: 'silent' }), clock },
    );
    await waitStoreReady(store);
    return { store, clock, close: () => store.close() };
  },
};

const count = (store: Store, apiKey: string, owner: string | undefined, outcome: Outcome, n: number) => {
  for (let i = 0; i < n; i++) store.countOutcome(apiKey, owner, outcome);
};
const report = async (store: Store, subject: UsageSubject, g: Granularity, nowMs: number) =>
  outcomeReport(await store.getOutcomeUsage(subject), g, nowMs);

describe.each(Object.keys(stores))('usage by outcome, %s store', (kind) => {
  it('counts each outcome in its minute, hour and day, split exactly at the boundary; an owner holds the sum of its keys', async () => {
    const { store, clock, close } = await stores[kind]!();
    count(store, 'a', 'acme', FORWARDED, 3);
    count(store, 'a', 'acme', REPLAYED, 1);
    clock.set(T + 1);
    count(store, 'a', 'acme', FORWARDED, 2);
    count(store, 'a', 'acme', RATE_LIMITED, 1);
    count(store, 'a', 'acme', CREDITS_EXHAUSTED, 1);
    count(store, 'a', 'acme', OTHER_REFUSAL, 1);
    count(store, 'b', 'acme', FORWARDED, 4);
    count(store, 'solo', undefined, OTHER_REFUSAL, 1);
    for (const g of GRANULARITIES) {
      const a = await report(store, { apiKey: 'a' }, g, T + 1);
      expect(a.buckets).toHaveLength(RINGS[g].size);
      expect(a.buckets.at(-1)).toEqual({
        start: new Date(T + 1).toISOString(),
        forwarded: 2,
        replay: 0,
        rate_limited: 1,
        credits_exhausted: 1,
        other_refusals: 1,
      });
      expect(a.buckets.at(-2)).toEqual({
        start: new Date(bucketOf(T, g) * RINGS[g].ms).toISOString(),
        ...ZERO,
        forwarded: 3,
        replay: 1,
      });
      expect(a.totals).toEqual({ forwarded: 5, replay: 1, rate_limited: 1, credits_exhausted: 1, other_refusals: 1 });
      const acme = await report(store, { owner: 'acme' }, g, T + 1);
      expect(acme.buckets.at(-1)).toMatchObject({ forwarded: 6, rate_limited: 1, credits_exhausted: 1 });
      expect(acme.totals).toEqual({
        forwarded: 9,
        replay: 1,
        rate_limited: 1,
        credits_exhausted: 1,
        other_refusals: 1,
      });
      expect((await report(store, { apiKey: 'solo' }, g, T + 1)).totals).toEqual({ ...ZERO, other_refusals: 1 });
      expect((await report(store, { apiKey: 'never' }, g, T + 1)).totals).toEqual(ZERO);
    }
    await close();
  });

  it('a bucket leaves the window once older than its ring; the newer bucket takes its slot, the longer rings keep it', async () => {
    const { store, clock, close } = await stores[kind]!();
    count(store, 'a', 'acme', FORWARDED, 1);
    await store.getOutcomeUsage({ apiKey: 'a' }); // written (Redis) before the clock moves on
    const last = T + 1_439 * MINUTE; // T's minute is the oldest of the window
    expect((await report(store, { apiKey: 'a' }, 'minute', last)).buckets[0]).toMatchObject({ forwarded: 1 });
    const next = T + 1_440 * MINUTE; // the same minute slot, a day later
    expect((await report(store, { apiKey: 'a' }, 'minute', next)).totals).toEqual(ZERO);
    clock.set(next);
    count(store, 'a', 'acme', REPLAYED, 1);
    const minutes = await report(store, { apiKey: 'a' }, 'minute', next);
    expect(minutes.totals).toEqual({ ...ZERO, replay: 1 });
    expect(minutes.buckets.at(-1)).toMatchObject({ replay: 1, forwarded: 0 });
    for (const g of ['hour', 'day'] as const)
      expect((await report(store, { owner: 'acme' }, g, next)).totals).toEqual({ ...ZERO, forwarded: 1, replay: 1 });
    await close();
  });

  it(
    "a key's rings never hold more than their fixed slots, however many minutes it is used; the counts in each window stay exact",
    async () => {
      const { store, clock, close } = await stores[kind]!();
      const step = 61 * MINUTE; // a new minute and hour every step, a new day every 24 steps or so
      const steps = 9_000; // 9,000 minutes, 9,000 hours, 381 days: every ring wraps
      for (let s = 0; s < steps; s++) {
        clock.set(T + 1 + s * step);
        store.countOutcome('busy', 'many', FORWARDED);
        if (s % 500 === 499) await store.getOutcomeUsage({ apiKey: 'busy' });
      }
      const now = T + 1 + (steps - 1) * step;
      for (const subject of [{ apiKey: 'busy' }, { owner: 'many' }]) {
        const rings = await store.getOutcomeUsage(subject);
        expect(rings.size).toBe(RING_SLOTS);
        for (const g of GRANULARITIES) {
          const first = bucketOf(now, g) - RINGS[g].size + 1;
          let inWindow = 0;
          for (let s = 0; s < steps; s++) if (bucketOf(T + 1 + s * step, g) >= first) inWindow++;
          expect((await report(store, subject, g, now)).totals.forwarded).toBe(inWindow);
        }
      }
      if (kind === 'redis') {
        const client = new Redis(redis.url);
        const names = await client.keys('*outcomes');
        expect(names.length).toBe(2);
        for (const name of names) expect(await client.hlen(name)).toBe(RING_SLOTS);
        client.disconnect();
      }
      await close();
    },
    guard(60_000),
  );
});

describe('usage by outcome, two Redis stores', () => {
  it("a replica's late batch for a bucket older than its slot holds is dropped from that ring, kept in the longer ones", async () => {
    await redis.flush();
    const logger = pino({ level: 'silent' });
    const early = manualClock(T);
    const late = manualClock(T + 1_440 * MINUTE);
    const a = createRedisStore({ url: redis.url, usageFlushMs: 3_600_000 }, { logger, clock: early });
    const b = createRedisStore({ url: redis.url, usageFlushMs: 3_600_000 }, { logger, clock: late });
    await waitStoreReady(a);
    await waitStoreReady(b);
    a.countOutcome('k', 'o', FORWARDED);
    b.countOutcome('k', 'o', REPLAYED);
    await b.flushUsage();
    await a.flushUsage(); // T's minute, written after the minute a day later took its slot
    const now = T + 1_440 * MINUTE;
    expect((await report(b, { apiKey: 'k' }, 'minute', now)).totals).toEqual({ ...ZERO, replay: 1 });
    expect((await report(b, { apiKey: 'k' }, 'hour', now)).totals).toEqual({ ...ZERO, forwarded: 1, replay: 1 });
    expect((await report(b, { owner: 'o' }, 'day', now)).totals).toEqual({ ...ZERO, forwarded: 1, replay: 1 });
    await a.close();
    await b.close();
  });
});

const SECRET = 'usage-outcomes-secret-0123456789';
const ORDERS_PATH = '/api/v3/orders';

describe('usage by outcome over the wire: only verified requests count; the API and the CLI report them', () => {
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let api: ManagementClient;

  beforeAll(async () => {
    await redis.flush();
    upstream = await startRecordingUpstream();
    const dir = mkdtempSync(join(tmpdir(), 'keygate-usage-outcomes-'));
    const policy = join(dir, 'policy.yaml');
    writeFileSync(
      policy,
      [
        'routes:',
        `  - { method: GET, path: ${ACCOUNTS_PATH}, scopes: [accounts:read] }`,
        `  - { method: GET, path: ${ORDERS_PATH}, scopes: [orders:write] }`,
        '',
      ].join('\n'),
    );
    const tokens = writeTokensFile([{ name: 'console', access: 'read' }]);
    const keys = [
      makeKey({ apiKey: 'u-1', secret: SECRET, owner: 'uo', rateLimit: { rate: '4/h', burst: 4 } }),
      makeKey({ apiKey: 'u-2', secret: SECRET, owner: 'uo' }),
    ];
    gate = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      keys,
      env: { KEYGATE_CONFIG: policy, KEYGATE_MANAGEMENT_PORT: '0', KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file },
    });
    api = managementClient(gate.managementUrl as string, tokens.tokens.console as string);
  });
  afterAll(async () => {
    await gate?.close();
    await upstream?.close();
  });

  const call = (apiKey: string, path = ACCOUNTS_PATH, secret = SECRET) =>
    send(gate.url, path, { headers: bearer(token(apiKey, secret)) });

  it('forwarded, replay, rate_limited and other refusals per key and owner; an unknown key or a bad signature counts nothing', async () => {
    expect((await call('u-1')).status).toBe(200);
    expect((await call('u-1')).status).toBe(200);
    const once = token('u-1', SECRET);
    expect((await send(gate.url, ACCOUNTS_PATH, { headers: bearer(once) })).status).toBe(200);
    const replayed = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(once) });
    expect(replayed.body).toContain('40106');
    expect((await call('u-1', ORDERS_PATH)).status).toBe(403); // scope_denied, after the admit (its 4th)
    expect((await call('u-1')).status).toBe(429); // the key's 4/h budget is spent
    expect((await call('u-2')).status).toBe(200);
    expect((await call('u-2', ACCOUNTS_PATH, 'not-the-secret-0123456789')).status).toBe(401); // bad signature
    expect((await call('nobody')).body).toContain('10013'); // unknown key

    const want = { forwarded: 3, replay: 1, rate_limited: 1, credits_exhausted: 0, other_refusals: 1 };
    for (const g of GRANULARITIES) {
      const r = await api.call('GET', `/v1/keys/u-1/usage?granularity=${g}`);
      expect(r.status).toBe(200);
      const body = r.json() as { apiKey: string; granularity: string; totals: object; buckets: unknown[] };
      expect(body).toMatchObject({ apiKey: 'u-1', granularity: g, totals: want });
      expect(body.buckets).toHaveLength(RINGS[g].size);
      const u2 = (await api.call('GET', `/v1/keys/u-2/usage?granularity=${g}`)).json() as { totals: object };
      expect(u2.totals).toEqual({ ...ZERO, forwarded: 1 });
      const owner = await api.call('GET', `/v1/owners/uo/usage?granularity=${g}`);
      expect(owner.status).toBe(200);
      expect((owner.json() as { totals: object }).totals).toEqual({ ...want, forwarded: 4 });
    }
    // The per-day report is unchanged without a granularity (admitted requests: the 4 of u-1's budget).
    const daily = (await api.call('GET', '/v1/keys/u-1/usage?days=1')).json() as { total: number };
    expect(daily.total).toBe(4);
    // Nothing was written under the names of requests whose signature did not verify.
    const client = new Redis(redis.url);
    expect(await client.keys('*nobody*')).toEqual([]);
    client.disconnect();
  });

  it.each([
    ['/v1/keys/u-1/usage?granularity=week', 'query.granularity: one of minute, hour, day'],
    ['/v1/keys/u-1/usage?granularity=', 'query.granularity: one of minute, hour, day'],
    ['/v1/keys/u-1/usage?granularity=hour&days=3', 'query.days: not with query.granularity'],
    ['/v1/owners/uo/usage?granularity=Minute', 'query.granularity: one of minute, hour, day'],
    ['/v1/owners/uo/usage?days=3', 'query.days: unknown parameter'],
  ])('GET %s: 400 naming the field', async (path, problem) => {
    const r = await api.call('GET', path);
    expect(r.status).toBe(400);
    expect((r.json() as { problems: string[] }).problems.join('\n')).toContain(problem);
  });

  it('GET /v1/keys/{apiKey}/usage?granularity= of no such key: 404', async () => {
    expect((await api.call('GET', '/v1/keys/none-such/usage?granularity=hour')).status).toBe(404);
  });

  async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
    return runCli(args, {
      env: { KEYGATE_REDIS_URL: redis.url, KEYGATE_ACTOR: 'usage-test' },
      openKeyStore: openRedisKeyStore,
    });
  }

  it('keygate keys usage --granularity and keygate owners usage read the same report; a bad granularity is a usage error', async () => {
    await gate.keygate.store.flushUsage();
    const json = await cli('keys', 'usage', 'u-1', '--granularity', 'minute', '--json');
    expect(json.err).toBe('');
    expect(JSON.parse(json.out)).toMatchObject({
      apiKey: 'u-1',
      granularity: 'minute',
      totals: { forwarded: 3, replay: 1, rate_limited: 1, credits_exhausted: 0, other_refusals: 1 },
    });
    const text = await cli('owners', 'usage', 'uo', '--granularity', 'day');
    expect(text.code).toBe(0);
    expect(text.out).toMatch(/^uo\n {2}by outcome per day, /);
    expect(text.out).toMatch(/\n {2}total {20}\s+4\s+1\s+1\s+0\s+1\n$/);
    const bad = await cli('keys', 'usage', 'u-1', '--granularity', 'week');
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('--granularity: one of minute, hour, day');
  });
});
