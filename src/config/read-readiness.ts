// Tested in test/e2e/admin-endpoints.test.ts, test/process/redis-unreachable.test.ts.
import type { Env } from './read-env-int.js';

/**
 * KEYGATE_READY_REQUIRES_KEYS=true|false (default false): /readyz answers 503 `no_keys` while the store
 * holds no key. Off by default: an empty store is a valid state (every token is refused with 10013), a
 * fresh install must become ready, and deleting the last key must not take every replica out of
 * rotation at once. On, it guards against pointing at the wrong Redis database; `serve` warns at start
 * either way when the store it finds is empty (src/cli/serve/empty-store-warning.ts).
 */
export function readReadyRequiresKeys(env: Env, problems: string[]): boolean {
  const raw = env.KEYGATE_READY_REQUIRES_KEYS || undefined;
  if (raw === undefined) return false;
  if (raw !== 'true' && raw !== 'false')
    problems.push(`KEYGATE_READY_REQUIRES_KEYS: "true" or "false", got ${JSON.stringify(raw)}`);
  return raw === 'true';
}
