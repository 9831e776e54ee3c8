import { createSecretKey, type KeyObject } from 'node:crypto';
import type { BlockList } from 'node:net';
import type { Clock } from '../clock.js';
import { parseCidrList } from '../config/cidr.js';
import type { KeyRecord } from './key-record.js';
import { compileRateLimit, type CompiledLimit } from './rate-limit.js';
import type { Store } from './types.js';

/** A secret imported once as a node:crypto KeyObject; previous (rotated) secrets carry their deadline. */
export interface VerifyKey {
  readonly key: KeyObject;
  /** Epoch ms after which this secret no longer verifies (Infinity for the current secret). */
  readonly validUntilMs: number;
}

/** A key made ready for the hot path: secrets imported once, allow-list and scopes compiled. */
export interface PreparedKey {
  readonly record: KeyRecord;
  /** Current secret first, then rotated secrets still in their grace period. */
  readonly verifyKeys: readonly VerifyKey[];
  /** expiresAt as epoch ms (Infinity when the key does not expire). */
  readonly expiresAtMs: number;
  readonly allowList: BlockList | null;
  readonly scopes: ReadonlySet<string>;
  /** The key's own rate limit, compiled; undefined = the policy default applies. */
  readonly rateLimit: CompiledLimit | undefined;
}

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
}

/**
 * The secret's UTF-8 bytes, as the contract says (never Base64-decoded). Made
 * into a KeyObject once per secret, so the hot path does not copy the secret
 * into a new HMAC key for every request.
 */
function importSecret(secret: string): KeyObject {
  return createSecretKey(Buffer.from(secret, 'utf8'));
}

export function prepareKey(record: KeyRecord): PreparedKey {
  const verifyKeys: VerifyKey[] = [{ key: importSecret(record.secret), validUntilMs: Infinity }];
  for (const p of record.previousSecrets ?? []) {
    verifyKeys.push({ key: importSecret(p.secret), validUntilMs: Date.parse(p.validUntil) });
  }
  return {
    record,
    verifyKeys,
    expiresAtMs: record.expiresAt === undefined ? Infinity : Date.parse(record.expiresAt),
    allowList: record.allowIps.length > 0 ? parseCidrList(record.allowIps, 'allowIps').list : null,
    scopes: new Set(record.scopes),
    rateLimit: record.rateLimit && compileRateLimit(record.rateLimit),
  };
}

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
    } else if (entries.delete(apiKey)) {
      events.onEvict?.('change');
    }
    if (apiKey === null) inflight.clear();
    else inflight.delete(apiKey);
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
      entries.set(apiKey, { value, expiresAt: deps.clock.nowMs() + ttl });
    }
    return value;
  }

  return {
    get(apiKey) {
      const hit = entries.get(apiKey);
      if (hit && hit.expiresAt > deps.clock.nowMs()) {
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
