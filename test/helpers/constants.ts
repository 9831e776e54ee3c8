/**
 * Values many tests share, so they read the same everywhere and change in one place.
 */

/** The signed route most tests call: GET it with a key that has accounts:read. */
export const ACCOUNTS_PATH = '/api/v3/viewer/accounts';

/** The demo key in examples/demo-keys.yaml (what `keygate demo` and the README quickstart use). */
export const DEMO_KEY = 'demo-key';
export const DEMO_SECRET = 'demo-secret-0123456789abcdef';

/**
 * The key cache TTL the propagation tests give their instances, and how long they wait for a published change.
 * A change seen well within the TTL was published, not expired: the wait tells the two apart and is no speed
 * expectation (a busy machine may take seconds to deliver a message that takes milliseconds when it is quiet).
 */
export const LONG_CACHE_TTL_MS = 600_000;
export const PUBLISHED_WITHIN = { timeout: 30_000, interval: 20 } as const;
