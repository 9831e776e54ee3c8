/**
 * Values many tests share, so they read the same everywhere and change in one place.
 */

/** The signed route most tests call: GET it with a key that has accounts:read. */
export const ACCOUNTS_PATH = '/api/v3/viewer/accounts';

/** The demo key in examples/demo-keys.yaml (what `keygate demo` and the README quickstart use). */
export const DEMO_KEY = 'demo-key';
export const DEMO_SECRET = 'demo-secret-0123456789abcdef';
