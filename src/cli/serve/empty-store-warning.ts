// Tested in test/process/redis-unreachable.test.ts, test/process/workers.test.ts ("holds no keys"),
// test/unit/empty-store-warning.test.ts (warnWhenSecretsPlain).
import type { Logger } from 'pino';
import type { Store } from '../../store/store.js';
import { isSealedSecret } from '../../keys/secret-cipher.js';

/** How often the store is asked again while it does not answer yet (Redis may come up after Keygate). */
export const EMPTY_STORE_RETRY_MS = 1_000;

/**
 * Asks `read` until the store answers (retrying every `retryMs` while it does not: Redis may come up after
 * Keygate), then hands the answer to `then` once. Returns a function that stops asking (at shutdown).
 */
function onceStoreAnswers<T>(
  read: (stopped: () => boolean) => Promise<T>,
  then: (answer: T) => void,
  retryMs = EMPTY_STORE_RETRY_MS,
): () => void {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const attempt = () => {
    read(() => stopped).then(
      (answer) => {
        if (!stopped) then(answer);
      },
      () => {
        if (!stopped) timer = setTimeout(attempt, retryMs);
      },
    );
  };
  attempt();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

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
  return onceStoreAnswers(
    () => deps.store.countKeys(),
    (count) => {
      if (count > 0) return;
      deps.logger.warn(
        { store: options.where, keys: 0, readyRequiresKeys: options.requireKeys },
        options.requireKeys
          ? `the key store (${options.where}) holds no keys: /readyz answers 503 no_keys until one is created (KEYGATE_READY_REQUIRES_KEYS=true)`
          : `the key store (${options.where}) holds no keys: every token is refused with 10013 until one is created ` +
              '(keygate keys create). Ready anyway; if this is the wrong Redis database, KEYGATE_READY_REQUIRES_KEYS=true keeps an empty store not ready',
      );
    },
    options.retryMs,
  );
}

/** Keys read per page while counting plain secrets: start-up reads every key once, a page at a time. */
const PLAIN_SECRETS_PAGE = 500;

/**
 * A Redis store without KEYGATE_SECRET_ENCRYPTION_KEY holds HS256 secrets as written: once the store first
 * answers, counts the keys with a plain secret (their own or one still in its grace) and, when there are
 * any, logs one warning with the count and the fix. Never a secret, never an apiKey. Returns a function that
 * stops asking (at shutdown).
 */
export function warnWhenSecretsPlain(
  options: { where: string; retryMs?: number },
  deps: { store: Pick<Store, 'listKeys'>; logger: Logger },
): () => void {
  const plain = (secret: string | undefined) => secret !== undefined && !isSealedSecret(secret);
  const count = async (stopped: () => boolean): Promise<number> => {
    let found = 0;
    let after: string | undefined;
    for (;;) {
      const page = await deps.store.listKeys({ limit: PLAIN_SECRETS_PAGE, ...(after !== undefined && { after }) });
      for (const r of page.records) {
        if (plain(r.secret) || (r.previousSecrets ?? []).some((p) => plain(p.secret))) found++;
      }
      const last = page.records.at(-1);
      if (!page.more || last === undefined || stopped()) return found;
      after = last.apiKey;
    }
  };
  return onceStoreAnswers(
    count,
    (keys) => {
      if (keys === 0) return;
      deps.logger.warn(
        { store: options.where, plainSecretKeys: keys },
        `the key store (${options.where}) holds ${keys} key${keys === 1 ? '' : 's'} with a secret stored unencrypted: ` +
          'set KEYGATE_SECRET_ENCRYPTION_KEY and run keygate keys reencrypt',
      );
    },
    options.retryMs,
  );
}
