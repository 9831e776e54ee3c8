// Tested in test/process/redis-unreachable.test.ts, test/process/workers.test.ts ("holds no keys").
import type { Logger } from 'pino';
import type { Store } from '../../store/store.js';

/** How often the store is asked again while it does not answer yet (Redis may come up after Keygate). */
export const EMPTY_STORE_RETRY_MS = 1_000;

/**
 * Once the store first answers, counts its keys; when there are none, logs one warning. An empty store
 * is ready by default (every token is refused with 10013), so this line is what is left of the guard
 * against pointing at the wrong Redis database; KEYGATE_READY_REQUIRES_KEYS=true keeps /readyz at 503
 * `no_keys` as well. Returns a function that stops asking (at shutdown).
 */
export function warnWhenStoreEmpty(
  options: { requireKeys: boolean; where: string; retryMs?: number },
  deps: { store: Pick<Store, 'countKeys'>; logger: Logger },
): () => void {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const attempt = () => {
    deps.store.countKeys().then(
      (count) => {
        if (stopped || count > 0) return;
        deps.logger.warn(
          { store: options.where, keys: 0, readyRequiresKeys: options.requireKeys },
          options.requireKeys
            ? `the key store (${options.where}) holds no keys: /readyz answers 503 no_keys until one is created (KEYGATE_READY_REQUIRES_KEYS=true)`
            : `the key store (${options.where}) holds no keys: every token is refused with 10013 until one is created ` +
                '(keygate keys create). Ready anyway; if this is the wrong Redis database, KEYGATE_READY_REQUIRES_KEYS=true keeps an empty store not ready',
        );
      },
      () => {
        if (!stopped) timer = setTimeout(attempt, options.retryMs ?? EMPTY_STORE_RETRY_MS);
      },
    );
  };
  attempt();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
