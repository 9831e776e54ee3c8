import type { Clock } from '../clock.js';
import type { KeyRecord } from './key-record.js';
import type { KeyChangeListener, Store } from './types.js';

export interface MemoryStoreOptions {
  keys?: readonly KeyRecord[];
  /** How often expired nonces are swept, in ms. */
  sweepIntervalMs?: number;
}

/**
 * Embedded store: keys and the replay guard live in this process only.
 * Node runs one callback at a time, so check-and-record of a nonce is atomic
 * within the process; it is NOT shared between processes (see KEYGATE_WORKERS).
 */
export interface MemoryStore extends Store {
  /** Swaps the whole key set in one step and tells listeners everything changed. */
  replaceAll(records: readonly KeyRecord[]): void;
  nonceCount(): number;
}

export function createMemoryStore(options: MemoryStoreOptions, deps: { clock: Clock }): MemoryStore {
  const keys = new Map<string, KeyRecord>();
  for (const r of options.keys ?? []) keys.set(r.apiKey, r);
  const nonces = new Map<string, number>(); // "apiKey\0nonce" -> expiry (ms)
  const listeners = new Set<KeyChangeListener>();
  const emit = (apiKey: string | null) => {
    for (const l of listeners) l(apiKey);
  };

  const sweep = () => {
    const now = deps.clock.nowMs();
    for (const [k, exp] of nonces) if (exp <= now) nonces.delete(k);
  };
  const timer = setInterval(sweep, options.sweepIntervalMs ?? 10_000);
  timer.unref();

  return {
    kind: 'memory',
    async getKey(apiKey) {
      return keys.get(apiKey) ?? null;
    },
    async listKeys() {
      return [...keys.values()];
    },
    async putKey(record) {
      keys.set(record.apiKey, record);
      emit(record.apiKey);
    },
    async deleteKey(apiKey) {
      const existed = keys.delete(apiKey);
      if (existed) emit(apiKey);
      return existed;
    },
    async recordNonce(apiKey, nonce, ttlMs) {
      const k = `${apiKey}\0${nonce}`;
      const now = deps.clock.nowMs();
      const exp = nonces.get(k);
      if (exp !== undefined && exp > now) return false;
      nonces.set(k, now + ttlMs);
      return true;
    },
    onKeyChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async appendAudit() {},
    async ping() {},
    async countKeys() {
      return keys.size;
    },
    async close() {
      clearInterval(timer);
      listeners.clear();
    },
    replaceAll(records) {
      keys.clear();
      for (const r of records) keys.set(r.apiKey, r);
      emit(null);
    },
    nonceCount() {
      return nonces.size;
    },
  };
}
