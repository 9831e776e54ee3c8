// Tested in test/e2e/admin-endpoints.test.ts, test/process/redis-unreachable.test.ts.
import { RedisMayEvictError, type HealthStore } from '../store/store.js';

/** Why /readyz answers 503. docs/running.md "Health and readiness" lists the same reasons. */
export const NOT_READY_REASONS = Object.freeze({
  shutting_down: 'SIGTERM/SIGINT received: draining in-flight requests, take this instance out of rotation',
  redis_unreachable: 'no connection to Redis: `cause` says why (refused, dns, timeout, tls, auth, ...)',
  store_unavailable: 'the key/nonce store (Redis) did not answer',
  redis_may_evict: 'Redis maxmemory-policy is not noeviction: nonces may be evicted (KEYGATE_ALLOW_EVICTING_REDIS)',
  no_keys: 'the store holds no keys (only with KEYGATE_READY_REQUIRES_KEYS=true)',
});

export type NotReadyReason = keyof typeof NOT_READY_REASONS;

/** A 503 from /readyz: the reason, and for `redis_unreachable` the cause and the client library's message. */
export interface NotReady {
  readonly reason: NotReadyReason;
  readonly cause?: string;
  readonly err?: string;
}

export interface ReadinessOptions {
  /** KEYGATE_READY_REQUIRES_KEYS: an empty store is not ready (a guard against the wrong Redis database). */
  readonly requireKeys: boolean;
}

export interface ReadinessDeps {
  readonly store: HealthStore;
  readonly closing: () => boolean;
}

/** One check: undefined when it passes, or why not. */
type ReadinessCheck = (options: ReadinessOptions, deps: ReadinessDeps) => Promise<NotReady | undefined>;

const notReady = (reason: NotReadyReason, more?: Omit<NotReady, 'reason'>): NotReady => ({ reason, ...more });

/** The checks, in order; the first that fails answers. A new reason is a row here and in NOT_READY_REASONS. */
const CHECKS: readonly ReadinessCheck[] = [
  async (_o, d) => (d.closing() ? notReady('shutting_down') : undefined),
  async (_o, d) => {
    const problem = d.store.connectionProblem?.();
    return problem && notReady('redis_unreachable', { cause: problem.cause, err: problem.err });
  },
  async (_o, d) => {
    try {
      await d.store.ping();
      return undefined;
    } catch {
      return notReady('store_unavailable');
    }
  },
  // Redis: the server's settings, read by the store (redis-server-checks.ts), allow serving requests.
  async (_o, d) => {
    try {
      await d.store.servable?.();
      return undefined;
    } catch (err) {
      return notReady(err instanceof RedisMayEvictError ? 'redis_may_evict' : 'store_unavailable');
    }
  },
  async (o, d) => {
    if (!o.requireKeys) return undefined;
    try {
      return (await d.store.countKeys()) > 0 ? undefined : notReady('no_keys');
    } catch {
      return notReady('store_unavailable');
    }
  },
];

/**
 * Ready = not shutting down, connected to Redis, the store answers, and (only with requireKeys) it
 * holds a key. An empty store is a valid state (every token is refused with 10013): ready by default,
 * so a fresh install becomes ready and deleting the last key does not take every replica out of rotation.
 * Resolves to undefined when ready, otherwise to the first failed check.
 */
export function createReadiness(options: ReadinessOptions, deps: ReadinessDeps): () => Promise<NotReady | undefined> {
  return async () => {
    for (const check of CHECKS) {
      const failed = await check(options, deps);
      if (failed) return failed;
    }
    return undefined;
  };
}
