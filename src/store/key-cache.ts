import type { Clock } from '../clock.js';
import { prepareKey, type PreparedKey } from '../keys/prepared-key.js';
import type { Store } from './store.js';

export interface KeyCacheOptions {
  /**
   * How long a found key is trusted while the store's change subscription is NOT confirmed
   * (bounds staleness when change messages may be lost). While it is confirmed, entries stay
   * until a change message or eviction.
   */
  ttlMs: number;
  /** How long "no such key" is remembered (a create's change message clears it sooner). */
  negativeTtlMs: number;
  /** Upper bound on cached entries (found keys and unknown ones, each); the least recently used goes first. */
  maxEntries: number;
}

export interface KeyCacheEvents {
  onHit?(): void;
  onMiss?(): void;
  onEvict?(cause: 'change' | 'flush' | 'size'): void;
  /** A stored key came with public keys prepareKey refused (weak-public-key.ts): told on every fill. */
  onRefusedCredentials?(keyId: string, problems: readonly string[]): void;
}

export interface KeyCache {
  /**
   * The key, or null for a key known not to exist. An entry in the cache is answered at once (no
   * promise, so the request path stays synchronous for a cached key on a store that answers at once);
   * a miss is a promise of the store's read.
   */
  get(apiKey: string): PreparedKey | null | Promise<PreparedKey | null>;
  /** Entries held now: found keys plus remembered unknown keys. */
  size(): number;
  close(): void;
}

interface Found {
  readonly value: PreparedKey;
  /** Until when the entry is trusted without a confirmed subscription. */
  readonly expiresAt: number;
  /** The subscription was confirmed when the read started: the entry may then outlive expiresAt while it stays so. */
  readonly live: boolean;
}

/**
 * Per-process cache of prepared keys in front of a Store, sized for the working set:
 *  - while the store's change subscription is confirmed (`store.subscribed()`), a found key stays
 *    until its change message, a flush or LRU eviction: no re-read every few seconds;
 *  - while it is not, entries fall back to the short TTL (a lost message cannot keep a revoked key
 *    alive longer than that), and regaining it flushes (the store emits `null`);
 *  - unknown keys are remembered for negativeTtlMs in a separate map whose insertion order is
 *    its expiry order, so expired ones are dropped from its front as new ones arrive; a name the
 *    store says no key has (Store.mayHaveKey: Redis's known-keys filter) is not read at all, so a
 *    flood of random names costs no store round trip;
 *  - expired entries are dropped when met and by a sweep, never kept.
 * Concurrent misses for one key share one store read; a read that raced with a change is not cached.
 */
export function createKeyCache(
  options: KeyCacheOptions,
  deps: { store: Store; clock: Clock; events?: KeyCacheEvents },
): KeyCache {
  const found = new Map<string, Found>(); // iteration order = least recently used first
  /** The key last put at the back of `found`: a hit on it is already in order (no delete and set, no table churn). */
  let newest: string | undefined;
  const unknown = new Map<string, number>(); // apiKey -> expiry; insertion order = expiry order (one TTL)
  const inflight = new Map<string, Promise<PreparedKey | null>>();
  const events = deps.events ?? {};
  const now = () => deps.clock.nowMs();
  // Bumped on every change so that a read started before a change is not cached after it.
  let generation = 0;

  const unsubscribe = deps.store.onKeyChange((apiKey) => {
    generation++;
    if (apiKey === null) {
      if (found.size > 0) events.onEvict?.('flush');
      found.clear();
      unknown.clear();
      inflight.clear();
    } else {
      if (found.delete(apiKey)) events.onEvict?.('change');
      unknown.delete(apiKey); // a create is seen at once
      inflight.delete(apiKey);
    }
  });

  const valid = (e: Found, t: number) => e.expiresAt > t || (e.live && deps.store.subscribed());

  function dropExpiredUnknown(t: number) {
    for (const [k, exp] of unknown) {
      if (exp > t) break;
      unknown.delete(k);
    }
  }

  function remember(apiKey: string, value: PreparedKey | null, live: boolean) {
    const t = now();
    if (value === null) {
      dropExpiredUnknown(t);
      if (unknown.size >= options.maxEntries) unknown.delete(unknown.keys().next().value as string);
      unknown.set(apiKey, t + options.negativeTtlMs);
      return;
    }
    if (found.size >= options.maxEntries) {
      found.delete(found.keys().next().value as string);
      events.onEvict?.('size');
    }
    // (Deleted first: a Map keeps a key it already holds where it was, and `newest` must be at the back.)
    found.delete(apiKey);
    found.set(apiKey, { value, expiresAt: t + options.ttlMs, live });
    newest = apiKey;
  }

  async function load(apiKey: string): Promise<PreparedKey | null> {
    const startGeneration = generation;
    const live = deps.store.subscribed();
    // A name the store's change messages have never announced is unknown without a read (Store.mayHaveKey).
    const record = deps.store.mayHaveKey?.(apiKey) === false ? null : await deps.store.getKey(apiKey);
    // The HMAC key objects are built here, on first use, never when a keys file loads.
    const value = record ? prepareKey(record) : null;
    if (value && value.refusedCredentials.length > 0)
      events.onRefusedCredentials?.(value.record.id, value.refusedCredentials);
    if (generation === startGeneration) remember(apiKey, value, live);
    return value;
  }

  // Entries left unconfirmed (subscription lost) expire without being asked for again: sweep them out.
  const sweep = setInterval(
    () => {
      const t = now();
      dropExpiredUnknown(t);
      if (deps.store.subscribed()) return;
      for (const [k, e] of found) if (!valid(e, t)) found.delete(k);
    },
    Math.max(options.ttlMs, 1_000),
  );
  sweep.unref();

  return {
    get(apiKey) {
      const t = now();
      const hit = found.get(apiKey);
      if (hit) {
        if (valid(hit, t)) {
          // Least recently used order: move to the back, unless it is there already (the same key
          // again: a deleted slot per hit made the Map rebuild its table every few hits).
          if (apiKey !== newest) {
            found.delete(apiKey);
            found.set(apiKey, hit);
            newest = apiKey;
          }
          events.onHit?.();
          return hit.value;
        }
        found.delete(apiKey);
      } else {
        const exp = unknown.get(apiKey);
        if (exp !== undefined) {
          if (exp > t) {
            events.onHit?.();
            return null;
          }
          unknown.delete(apiKey);
        }
      }
      events.onMiss?.();
      let p = inflight.get(apiKey);
      if (!p) {
        p = load(apiKey).finally(() => {
          if (inflight.get(apiKey) === p) inflight.delete(apiKey);
        });
        inflight.set(apiKey, p);
      }
      return p;
    },
    size: () => found.size + unknown.size,
    close() {
      clearInterval(sweep);
      unsubscribe();
      found.clear();
      unknown.clear();
    },
  };
}
