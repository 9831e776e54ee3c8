import { describe, expect, it, vi } from 'vitest';
import { manualClock } from '../../src/clock.js';
import { createKeyCache } from '../../src/store/key-cache.js';
import { createMemoryStore } from '../../src/store/memory/memory-store.js';
import type { Store } from '../../src/store/store.js';
import { makeKey } from '../helpers/make-key.js';

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

/** A store whose subscription can be confirmed or lost at will; regaining it flushes, as the Redis store does. */
function switchable<S extends Store>(inner: S): { store: S; setSubscribed(up: boolean): void } {
  let up = true;
  const listeners = new Set<(k: string | null) => void>();
  const store = Object.create(inner) as S;
  store.subscribed = () => up;
  store.onKeyChange = (l) => {
    listeners.add(l);
    const off = inner.onKeyChange(l);
    return () => {
      listeners.delete(l);
      off();
    };
  };
  return {
    store,
    setSubscribed(next) {
      const regained = next && !up;
      up = next;
      if (regained) for (const l of listeners) l(null);
    },
  };
}

describe('key cache', () => {
  const opts = { ttlMs: 5_000, negativeTtlMs: 1_000, maxEntries: 2 };

  it('shares one store read between concurrent misses of one key', async () => {
    const clock = manualClock();
    const store = countingStore(createMemoryStore({ keys: [makeKey({ apiKey: 'a' })] }, { clock }));
    const cache = createKeyCache(opts, { store, clock });
    const got = await Promise.all(Array.from({ length: 20 }, async () => cache.get('a')));
    expect(store.reads).toBe(1);
    expect(got.every((g) => g?.record.apiKey === 'a')).toBe(true);
  });

  it('does not read a name the store says no key has (mayHaveKey false), and reads every other one', async () => {
    const clock = manualClock();
    const store = countingStore(createMemoryStore({ keys: [makeKey({ apiKey: 'a' })] }, { clock }));
    const absent = new Set(['nobody', 'a']); // 'a' too: the cache trusts the store's answer, it does not second-guess it
    store.mayHaveKey = (k) => !absent.has(k);
    const cache = createKeyCache({ ...opts, maxEntries: 100 }, { store, clock });
    expect(await cache.get('nobody')).toBeNull();
    expect(await cache.get('a')).toBeNull();
    expect(store.reads).toBe(0);
    absent.delete('a');
    await store.putKey(makeKey({ apiKey: 'a' })); // its change message clears the remembered "unknown"
    expect((await cache.get('a'))?.record.apiKey).toBe('a');
    expect(await cache.get('somebody')).toBeNull();
    expect(store.reads).toBe(2);
  });

  it('keeps a found key past the TTL while the subscription is confirmed, and drops it at once on its change message', async () => {
    const clock = manualClock();
    const mem = createMemoryStore({ keys: [makeKey({ apiKey: 'a' })] }, { clock });
    const store = countingStore(mem);
    const cache = createKeyCache(opts, { store, clock });
    await cache.get('a');
    clock.advance(3_600_000);
    expect((await cache.get('a'))?.record.state).toBe('active');
    expect(store.reads).toBe(1);
    await mem.putKey(makeKey({ apiKey: 'a', state: 'revoked' }));
    expect((await cache.get('a'))?.record.state).toBe('revoked');
    expect(store.reads).toBe(2);
  });

  // [case, subscribed while reading, subscribed when asked again, store reads just before the TTL, just after]
  const ttlCases: Array<[string, boolean, boolean, number, number]> = [
    ['confirmed throughout: kept', true, true, 1, 1],
    ['lost after the read: falls back to the TTL', true, false, 1, 2],
    ['never confirmed: the TTL', false, false, 1, 2],
    [
      'confirmed after the read: the regain flushes it (changes may have been missed), the new read is kept',
      false,
      true,
      2,
      2,
    ],
  ];
  it.each(ttlCases)('subscription %s', async (_name, before, after, readsBefore, readsAfter) => {
    const clock = manualClock();
    const { store, setSubscribed } = switchable(
      countingStore(createMemoryStore({ keys: [makeKey({ apiKey: 'a' })] }, { clock })),
    );
    const cache = createKeyCache(opts, { store, clock });
    setSubscribed(before);
    await cache.get('a');
    setSubscribed(after);
    clock.advance(4_999);
    await cache.get('a');
    expect(store.reads).toBe(readsBefore);
    clock.advance(2);
    await cache.get('a');
    expect(store.reads).toBe(readsAfter);
  });

  it('drops expired entries instead of keeping them', async () => {
    vi.useFakeTimers();
    try {
      const clock = manualClock();
      const { store, setSubscribed } = switchable(
        createMemoryStore({ keys: ['a', 'b'].map((k) => makeKey({ apiKey: k })) }, { clock }),
      );
      const cache = createKeyCache({ ...opts, maxEntries: 10 }, { store, clock });
      setSubscribed(false);
      await cache.get('a');
      await cache.get('b');
      await cache.get('nope');
      expect(cache.size()).toBe(3);
      clock.advance(5_001);
      vi.advanceTimersByTime(5_001);
      expect(cache.size()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('forgets an unknown key at once when the key is created (its change message)', async () => {
    const clock = manualClock();
    const mem = createMemoryStore({}, { clock });
    const store = countingStore(mem);
    const cache = createKeyCache(opts, { store, clock });
    expect(await cache.get('late')).toBeNull();
    expect(await cache.get('late')).toBeNull();
    expect(store.reads).toBe(1);
    await mem.putKey(makeKey({ apiKey: 'late' }));
    expect((await cache.get('late'))?.record.apiKey).toBe('late');
  });

  it('evicts the least recently used, not the oldest inserted', async () => {
    const clock = manualClock();
    const store = countingStore(
      createMemoryStore({ keys: ['a', 'b', 'c'].map((k) => makeKey({ apiKey: k })) }, { clock }),
    );
    const cache = createKeyCache(opts, { store, clock });
    await cache.get('a');
    await cache.get('b');
    await cache.get('a'); // a is now the most recently used
    await cache.get('c'); // evicts b
    const reads = store.reads;
    await cache.get('a');
    expect(store.reads).toBe(reads);
    await cache.get('b');
    expect(store.reads).toBe(reads + 1);
  });

  it('bounds remembered unknown keys too (a flood of random names)', async () => {
    const clock = manualClock();
    const cache = createKeyCache(opts, { store: createMemoryStore({}, { clock }), clock });
    for (let i = 0; i < 50; i++) await cache.get(`random-${i}`);
    expect(cache.size()).toBe(2);
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
