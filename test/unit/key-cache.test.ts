import { describe, expect, it } from 'vitest';
import { manualClock } from '../../src/clock.js';
import { createKeyCache } from '../../src/store/key-cache.js';
import { createMemoryStore } from '../../src/store/memory-store.js';
import type { Store } from '../../src/store/store.js';
import { makeKey } from '../helpers/keygate.js';

function countingStore(inner: Store): Store & { reads: number } {
  const s = Object.create(inner) as Store & { reads: number };
  s.reads = 0;
  s.getKey = async (k) => {
    s.reads++;
    await new Promise((r) => setTimeout(r, 10));
    return inner.getKey(k);
  };
  return s;
}

describe('key cache', () => {
  const opts = { ttlMs: 5_000, negativeTtlMs: 1_000, maxEntries: 2 };

  it('shares one store read between concurrent misses of one key', async () => {
    const clock = manualClock();
    const store = countingStore(createMemoryStore({ keys: [makeKey({ apiKey: 'a' })] }, { clock }));
    const cache = createKeyCache(opts, { store, clock });
    const got = await Promise.all(Array.from({ length: 20 }, () => cache.get('a')));
    expect(store.reads).toBe(1);
    expect(got.every((g) => g?.record.apiKey === 'a')).toBe(true);
  });

  it('serves hits until the TTL, then reads again', async () => {
    const clock = manualClock();
    const store = countingStore(createMemoryStore({ keys: [makeKey({ apiKey: 'a' })] }, { clock }));
    const cache = createKeyCache(opts, { store, clock });
    await cache.get('a');
    clock.advance(4_999);
    await cache.get('a');
    expect(store.reads).toBe(1);
    clock.advance(2);
    await cache.get('a');
    expect(store.reads).toBe(2);
  });

  it('remembers unknown keys for the shorter negative TTL', async () => {
    const clock = manualClock();
    const store = countingStore(createMemoryStore({}, { clock }));
    const cache = createKeyCache(opts, { store, clock });
    expect(await cache.get('nope')).toBeNull();
    expect(await cache.get('nope')).toBeNull();
    expect(store.reads).toBe(1);
    clock.advance(1_001);
    await cache.get('nope');
    expect(store.reads).toBe(2);
  });

  it('evicts at once when the store announces a change', async () => {
    const clock = manualClock();
    const mem = createMemoryStore({ keys: [makeKey({ apiKey: 'a' })] }, { clock });
    const cache = createKeyCache(opts, { store: mem, clock });
    expect((await cache.get('a'))?.record.state).toBe('active');
    await mem.putKey(makeKey({ apiKey: 'a', state: 'revoked' }));
    expect((await cache.get('a'))?.record.state).toBe('revoked');
  });

  it('does not cache a read that raced with a change', async () => {
    const clock = manualClock();
    const mem = createMemoryStore({ keys: [makeKey({ apiKey: 'a' })] }, { clock });
    const store = countingStore(mem);
    const cache = createKeyCache(opts, { store, clock });
    const pending = cache.get('a');
    await mem.putKey(makeKey({ apiKey: 'a', state: 'revoked' }));
    await pending;
    expect((await cache.get('a'))?.record.state).toBe('revoked');
  });

  it('bounds its size, evicting the oldest', async () => {
    const clock = manualClock();
    const store = countingStore(
      createMemoryStore({ keys: ['a', 'b', 'c'].map((k) => makeKey({ apiKey: k })) }, { clock }),
    );
    const evicted: string[] = [];
    const cache = createKeyCache(opts, { store, clock, events: { onEvict: (c) => evicted.push(c) } });
    for (const k of ['a', 'b', 'c']) await cache.get(k);
    expect(cache.size()).toBe(2);
    expect(evicted).toEqual(['size']);
  });

  it('does not cache store failures', async () => {
    const clock = manualClock();
    const mem = createMemoryStore({ keys: [makeKey({ apiKey: 'a' })] }, { clock });
    let fail = true;
    const store = Object.create(mem) as Store;
    store.getKey = async (k) => {
      if (fail) throw new Error('down');
      return mem.getKey(k);
    };
    const cache = createKeyCache(opts, { store, clock });
    await expect(cache.get('a')).rejects.toThrow('down');
    fail = false;
    expect((await cache.get('a'))?.record.apiKey).toBe('a');
  });
});
