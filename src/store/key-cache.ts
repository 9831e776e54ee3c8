import type { Clock } from '../clock.js';
import { prepareKey, type PreparedKey } from '../keys/prepared-key.js';
import type { Store } from './store.js';

export interface KeyCacheOptions {
  /** How long a found key is trusted without asking the store again (bounds staleness if a change message is lost). */
  ttlMs: number;
  /** How long "no such key" is remembered. */
  negativeTtlMs: number;
  /** Upper bound on cached entries; the oldest is evicted first. */
  maxEntries: number;
}

export interface KeyCacheEvents {
  onHit?(): void;
  onMiss?(): void;
  onEvict?(cause: 'change' | 'flush' | 'size'): void;
}

export interface KeyCache {
  get(apiKey: string): Promise<PreparedKey | null>;
  size(): number;
  close(): void;
}

interface Entry {
  value: PreparedKey | null;
  expiresAt: number;
  loadedAt: number;
}

/**
 * How long an entry is trusted while the store cannot confirm that change messages arrive
 * (Store.subscribed false): a revocation then takes effect within about this long.
 */
export const UNSUBSCRIBED_TRUST_MS = 1_000;

/**
 * Per-process cache in front of a Store. Concurrent misses for one key share a
 * single store read; changes announced by the store evict at once.
 */
export function createKeyCache(
  options: KeyCacheOptions,
  deps: { store: Store; clock: Clock; events?: KeyCacheEvents },
): KeyCache {
  const entries = new Map<string, Entry>();
  const inflight = new Map<string, Promise<PreparedKey | null>>();
  const events = deps.events ?? {};
  // Bumped on every change so that a read started before a change is not cached after it.
  let generation = 0;

  const unsubscribe = deps.store.onKeyChange((apiKey) => {
    generation++;
    if (apiKey === null) {
      if (entries.size > 0) events.onEvict?.('flush');
      entries.clear();
      inflight.clear();
    } else {
      if (entries.delete(apiKey)) events.onEvict?.('change');
      inflight.delete(apiKey);
    }
  });

  async function load(apiKey: string): Promise<PreparedKey | null> {
    const startGeneration = generation;
    const record = await deps.store.getKey(apiKey);
    const value = record ? prepareKey(record) : null;
    if (generation === startGeneration) {
      if (entries.size >= options.maxEntries) {
        const oldest = entries.keys().next();
        if (!oldest.done) {
          entries.delete(oldest.value);
          events.onEvict?.('size');
        }
      }
      const ttl = value ? options.ttlMs : options.negativeTtlMs;
      const now = deps.clock.nowMs();
      entries.set(apiKey, { value, expiresAt: now + ttl, loadedAt: now });
    }
    return value;
  }

  return {
    get(apiKey) {
      const hit = entries.get(apiKey);
      const now = deps.clock.nowMs();
      const trusted = (e: Entry) =>
        e.expiresAt > now && (deps.store.subscribed() || e.loadedAt + UNSUBSCRIBED_TRUST_MS > now);
      if (hit && trusted(hit)) {
        events.onHit?.();
        return Promise.resolve(hit.value);
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
    size: () => entries.size,
    close() {
      unsubscribe();
      entries.clear();
    },
  };
}
