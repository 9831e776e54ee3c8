import type { Store } from './store.js';

/** Waits until a store answers PING (Redis connects asynchronously); rethrows the last failure after `timeoutMs`. */
export async function waitStoreReady(store: Store, timeoutMs = 5_000, intervalMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await store.ping();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }
}
