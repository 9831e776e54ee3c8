import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../../src/clock.js';
import { createMemoryStore } from '../../src/store/memory-store.js';
import { createRedisStore } from '../../src/store/redis-store.js';
import { compileRateLimit } from '../../src/policy/rate-limit-spec.js';
import type { Admission, Store } from '../../src/store/store.js';
import { makeKey, waitStoreReady } from '../helpers/keygate.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';

/**
 * One contract, two stores. Whatever Keygate relies on from a store is
 * asserted here, against the embedded memory store and a real Redis.
 */
interface Harness {
  /** A fresh, empty store plus a second handle on the same data (a second instance). */
  open(): Promise<{ store: Store; peer: Store; advance(ms: number): Promise<void> }>;
  close(): Promise<void>;
}

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis({ shared: true });
});
afterAll(async () => {
  await redis.stop();
});

const harnesses: Record<string, () => Harness> = {
  memory: () => {
    const opened: Store[] = [];
    return {
      async open() {
        const clock = manualClock();
        const store = createMemoryStore({}, { clock });
        opened.push(store);
        // In memory mode the "other instance" is the same process.
        return { store, peer: store, advance: async (ms) => clock.advance(ms) };
      },
      async close() {
        await Promise.all(opened.map((s) => s.close()));
      },
    };
  },
  redis: () => {
    const opened: Store[] = [];
    return {
      async open() {
        await redis.flush();
        const logger = pino({ level: 'silent' });
        const store = createRedisStore({ url: redis.url }, { logger });
        const peer = createRedisStore({ url: redis.url }, { logger });
        opened.push(store, peer);
        await waitStoreReady(store);
        await waitStoreReady(peer);
        // Redis expires keys on its own clock: advancing means waiting.
        return { store, peer, advance: (ms) => new Promise((r) => setTimeout(r, ms)) };
      },
      async close() {
        await Promise.all(opened.map((s) => s.close()));
      },
    };
  },
};

describe.each(Object.keys(harnesses))('store contract: %s', (kind) => {
  const h = harnesses[kind]!();
  afterAll(() => h.close());

  it('stores, reads, lists and deletes keys', async () => {
    const { store, peer } = await h.open();
    expect(await store.getKey('a')).toBeNull();
    const a = makeKey({ apiKey: 'a', scopes: ['x', 'y'], allowIps: ['10.0.0.0/8'], label: 'lab' });
    const b = makeKey({ apiKey: 'b' });
    await store.putKey(a);
    await store.putKey(b);
    expect(await peer.getKey('a')).toEqual(a);
    expect((await peer.listKeys()).map((r) => r.apiKey).sort()).toEqual(['a', 'b']);
    expect(await store.deleteKey('a')).toBe(true);
    expect(await store.deleteKey('a')).toBe(false);
    expect(await peer.getKey('a')).toBeNull();
  });

  it('keeps revoked keys readable with their state', async () => {
    const { store, peer } = await h.open();
    await store.putKey(
      makeKey({ apiKey: 'r', state: 'revoked', revokedAt: new Date().toISOString(), revokeReason: 'leaked' }),
    );
    expect(await peer.getKey('r')).toMatchObject({ state: 'revoked', revokeReason: 'leaked' });
  });

  const admitted = (a: Admission) => a.outcome === 'admitted';
  const nonceOnly = (store: Store, apiKey: string, nonce: string, ttlMs = 10_000) =>
    store.admit(apiKey, nonce, ttlMs, undefined);

  it('records a nonce once per key and lets the same nonce under another key through', async () => {
    const { store, peer } = await h.open();
    expect(await nonceOnly(store, 'k1', '123')).toEqual({ outcome: 'admitted', rate: undefined });
    expect(await nonceOnly(store, 'k1', '123')).toEqual({ outcome: 'replay' });
    expect(await nonceOnly(peer, 'k1', '123')).toEqual({ outcome: 'replay' });
    expect((await nonceOnly(store, 'k2', '123')).outcome).toBe('admitted');
    expect((await nonceOnly(store, 'k1', '124')).outcome).toBe('admitted');
  });

  it('is atomic under 50 concurrent attempts', async () => {
    const { store, peer } = await h.open();
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => nonceOnly(i % 2 ? store : peer, 'k', '999')),
    );
    expect(results.filter(admitted)).toHaveLength(1);
  });

  it('forgets a nonce after its TTL', async () => {
    const { store, advance } = await h.open();
    expect((await nonceOnly(store, 'k', '1', 150)).outcome).toBe('admitted');
    await advance(400);
    expect((await nonceOnly(store, 'k', '1', 150)).outcome).toBe('admitted');
  });

  it('a commit with a claim: of 20 concurrent creates under one claim from two instances exactly one lands and sets it (with its version), the rest are refused with its value; a refused commit leaves no claim; free again after the TTL', async () => {
    const { store, peer, advance } = await h.open();
    const create = (s: Store, apiKey: string, name = 'idempotency:x') =>
      s.commitKeyChanges({
        writes: [{ apiKey, expect: 0, next: makeKey({ apiKey, id: apiKey }) }],
        audit: [],
        claim: { name, value: apiKey, ttlMs: 150 },
      });
    const got = await Promise.all(Array.from({ length: 20 }, (_, i) => create(i % 2 ? store : peer, `k${i}`)));
    const landed = got.flatMap((g, i) => (g.ok ? [{ apiKey: `k${i}`, version: g.versions[0] }] : []));
    expect(landed).toHaveLength(1);
    const winner = landed[0]!;
    expect((await store.listKeys()).map((r) => r.apiKey)).toEqual([winner.apiKey]);
    for (const g of got.filter((x) => !x.ok))
      expect(g).toEqual({
        ok: false,
        conflict: 'claimed',
        name: 'idempotency:x',
        value: `${winner.version} ${winner.apiKey}`,
      });
    // A commit refused for another reason (the key exists) sets no claim.
    expect(await create(store, winner.apiKey, 'idempotency:y')).toMatchObject({ ok: false, conflict: 'version' });
    expect((await create(peer, 'other', 'idempotency:y')).ok).toBe(true);
    await advance(400);
    expect((await create(peer, 'later')).ok).toBe(true);
  });

  // 5/s burst 10: T = 200 ms, a whole burst back in 2 s. Generous margins: the Redis harness runs on real time.
  const TEN = compileRateLimit({ rate: '5/s', burst: 10 });

  it('rate limit: of 25 concurrent requests from two instances exactly the burst passes, then one per interval', async () => {
    const { store, peer, advance } = await h.open();
    const results = await Promise.all(
      Array.from({ length: 25 }, (_, i) => (i % 2 ? store : peer).admit('rl', `n${i}`, 10_000, TEN)),
    );
    const passed = results.filter(admitted);
    expect(passed).toHaveLength(10);
    // Each admitted request saw a different "remaining": 9, 8, … 0.
    expect(
      passed.map((a) => (a.outcome === 'admitted' ? a.rate?.remaining : -1)).sort((a, b) => (a ?? 0) - (b ?? 0)),
    ).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    for (const r of results.filter((a) => a.outcome === 'limited')) {
      if (r.outcome !== 'limited') continue;
      expect(r.rate.remaining).toBe(0);
      expect(r.rate.retryAfterUs).toBeGreaterThan(0);
      expect(r.rate.retryAfterUs).toBeLessThanOrEqual(200_000);
      expect(r.rate.resetUs).toBeGreaterThan(1_600_000);
      expect(r.rate.resetUs).toBeLessThanOrEqual(2_000_000);
    }
    await advance(250);
    const next = await Promise.all([
      store.admit('rl', 'later-1', 10_000, TEN),
      peer.admit('rl', 'later-2', 10_000, TEN),
    ]);
    expect(next.filter(admitted)).toHaveLength(1);
    // After a whole burst interval the full allowance is back.
    await advance(2_100);
    const refill = await Promise.all(Array.from({ length: 12 }, (_, i) => store.admit('rl', `again${i}`, 10_000, TEN)));
    expect(refill.filter(admitted)).toHaveLength(10);
  });

  it('a limited request records no nonce, and a replay spends no allowance', async () => {
    const { store, peer, advance } = await h.open();
    const two = compileRateLimit({ rate: '2/s' }); // burst defaults to the count: 2
    expect((await store.admit('k', 'a', 10_000, two)).outcome).toBe('admitted');
    expect((await peer.admit('k', 'a', 10_000, two)).outcome).toBe('replay'); // spends nothing…
    expect((await store.admit('k', 'b', 10_000, two)).outcome).toBe('admitted'); // …so the second request still passes
    expect((await store.admit('k', 'c', 10_000, two)).outcome).toBe('limited');
    await advance(1_100);
    // "c" was not burned by its 429: the same token passes once allowed.
    expect((await peer.admit('k', 'c', 10_000, two)).outcome).toBe('admitted');
    expect((await store.admit('k', 'c', 10_000, two)).outcome).toBe('replay');
  });

  it('limits each key on its own; no limit means no rate state', async () => {
    const { store } = await h.open();
    const one = compileRateLimit({ rate: '1/h' });
    expect((await store.admit('x', '1', 10_000, one)).outcome).toBe('admitted');
    expect((await store.admit('x', '2', 10_000, one)).outcome).toBe('limited');
    expect((await store.admit('y', '1', 10_000, one)).outcome).toBe('admitted');
    const open = await Promise.all(
      Array.from({ length: 30 }, (_, i) => store.admit('x', `free${i}`, 10_000, undefined)),
    );
    expect(open.every(admitted)).toBe(true);
  });

  it('counts usage per admitted request only, with lastUsedAt, on every instance', async () => {
    const { store, peer } = await h.open();
    expect(await store.getUsage('u')).toEqual({ lastUsedAtMs: undefined, perDay: {} });
    const lim = compileRateLimit({ rate: '5/m' });
    const before = Date.now();
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => (i % 2 ? store : peer).admit('u', `n${i}`, 10_000, lim)),
    );
    await peer.admit('u', 'n0', 10_000, undefined); // replay: not counted
    await store.admit('u', 'free', 10_000, undefined); // no limit: counted
    const count = results.filter(admitted).length + 1;
    expect(count).toBe(6);
    // Redis counts usage in each process and writes it in batches: what `store` counted reaches
    // `peer` after store's flush (once a second, or now); peer's own counts it flushes itself.
    await store.flushUsage();
    const usage = await peer.getUsage('u');
    expect(Object.values(usage.perDay).reduce((a, b) => a + b, 0)).toBe(count);
    expect(Object.keys(usage.perDay)[0]).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(usage.lastUsedAtMs).toBeGreaterThanOrEqual(before - 5_000);
    expect(usage.lastUsedAtMs).toBeLessThanOrEqual(Date.now() + 5_000);
    expect(await store.getUsage('other')).toEqual({ lastUsedAtMs: undefined, perDay: {} });
  });

  it('deleting a key drops its usage and rate state', async () => {
    const { store, peer } = await h.open();
    await store.putKey(makeKey({ apiKey: 'gone' }));
    const one = compileRateLimit({ rate: '1/h' });
    expect((await store.admit('gone', '1', 10_000, one)).outcome).toBe('admitted');
    expect((await store.admit('gone', '2', 10_000, one)).outcome).toBe('limited');
    await store.deleteKey('gone');
    expect(await peer.getUsage('gone')).toEqual({ lastUsedAtMs: undefined, perDay: {} });
    expect((await peer.admit('gone', '3', 10_000, one)).outcome).toBe('admitted');
  });

  it('announces key changes to listeners, including on another instance', async () => {
    const { store, peer } = await h.open();
    const seen: Array<string | null> = [];
    const off = peer.onKeyChange((k) => seen.push(k));
    await store.putKey(makeKey({ apiKey: 'c' }));
    await store.deleteKey('c');
    await expect.poll(() => seen.filter((k) => k === 'c').length, { timeout: 2_000 }).toBe(2);
    off();
  });

  it('counts its keys, of any state (for /readyz)', async () => {
    const { store } = await h.open();
    const start = await store.countKeys();
    await store.putKey(makeKey({ apiKey: 'count-a' }));
    await store.putKey(makeKey({ apiKey: 'count-b', state: 'revoked' }));
    await store.putKey(makeKey({ apiKey: 'count-a' }));
    expect(await store.countKeys()).toBe(start + 2);
    await store.deleteKey('count-a');
    expect(await store.countKeys()).toBe(start + 1);
  });

  it('answers ping', async () => {
    const { store } = await h.open();
    await expect(store.ping()).resolves.toBeUndefined();
  });
});
