// Tested in test/e2e/redis-outage-log.test.ts.
import type { Store } from './store.js';

/** Waits until `ping` resolves (Redis connects asynchronously); rethrows the last failure after `timeoutMs`. */
export async function waitUntilAnswers(
  ping: () => Promise<unknown>,
  timeoutMs: number,
  intervalMs = 20,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await ping();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }
}

/** Waits until a store answers PING on the request path's connection. */
export function waitStoreReady(store: Store, timeoutMs = 5_000, intervalMs = 20): Promise<void> {
  return waitUntilAnswers(() => store.ping(), timeoutMs, intervalMs);
}
