import { RedisMayEvictError } from '../store/redis-server-checks.js';
import type { Store } from '../store/store.js';

/** Why /readyz answers 503. docs/running.md "Health and readiness" lists the same reasons. */
export const NOT_READY_REASONS = Object.freeze({
  shutting_down: 'SIGTERM/SIGINT received: draining in-flight requests, take this instance out of rotation',
  store_unavailable: 'the key/nonce store (Redis) did not answer',
  redis_may_evict: 'Redis maxmemory-policy is not noeviction: nonces may be evicted (KEYGATE_ALLOW_EVICTING_REDIS)',
  no_keys: 'the store holds no keys, so every token would be refused with 10013',
});

export type NotReadyReason = keyof typeof NOT_READY_REASONS;

/**
 * Ready = not shutting down, the store answers, and it holds at least one key.
 * Resolves to undefined when ready, otherwise to the reason.
 */
export function createReadiness(deps: {
  store: Store;
  closing: () => boolean;
}): () => Promise<NotReadyReason | undefined> {
  return async () => {
    if (deps.closing()) return 'shutting_down';
    let count: number;
    try {
      await deps.store.ping();
      count = await deps.store.countKeys();
    } catch (err) {
      if (err instanceof RedisMayEvictError) return 'redis_may_evict';
      return 'store_unavailable';
    }
    return count > 0 ? undefined : 'no_keys';
  };
}
