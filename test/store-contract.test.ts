import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../src/clock.js';
import { createMemoryStore } from '../src/store/memory-store.js';
import { createRedisStore } from '../src/store/redis-store.js';
import type { Store } from '../src/store/types.js';
import { makeKey, waitStoreReady } from './helpers/keygate.js';
import { startRedis, type TestRedis } from './helpers/redis-server.js';

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
    await store.putKey(makeKey({ apiKey: 'r', state: 'revoked', revokedAt: new Date().toISOString(), revokeReason: 'leaked' }));
    expect(await peer.getKey('r')).toMatchObject({ state: 'revoked', revokeReason: 'leaked' });
  });

  it('records a nonce once per key and lets the same nonce under another key through', async () => {
    const { store, peer } = await h.open();
    expect(await store.recordNonce('k1', '123', 10_000)).toBe(true);
    expect(await store.recordNonce('k1', '123', 10_000)).toBe(false);
    expect(await peer.recordNonce('k1', '123', 10_000)).toBe(false);
    expect(await store.recordNonce('k2', '123', 10_000)).toBe(true);
    expect(await store.recordNonce('k1', '124', 10_000)).toBe(true);
  });

  it('is atomic under 50 concurrent attempts', async () => {
    const { store, peer } = await h.open();
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => (i % 2 ? store : peer).recordNonce('k', '999', 10_000)));
    expect(results.filter(Boolean)).toHaveLength(1);
  });

  it('forgets a nonce after its TTL', async () => {
    const { store, advance } = await h.open();
    expect(await store.recordNonce('k', '1', 150)).toBe(true);
    await advance(400);
    expect(await store.recordNonce('k', '1', 150)).toBe(true);
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
