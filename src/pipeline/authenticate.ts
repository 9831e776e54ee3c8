import type { Clock } from '../clock.js';
import { deny, type Denial } from '../errors.js';
import type { KeyCache, PreparedKey } from '../store/key-cache.js';
import type { Store } from '../store/types.js';
import { checkTime } from './check-time.js';
import { decodeToken, type DecodeOptions } from './decode-token.js';
import { readCredentials } from './read-credentials.js';
import { verifySignature } from './verify-signature.js';

export interface Authenticated {
  readonly ok: true;
  readonly key: PreparedKey;
}

export interface Authenticator {
  (rawHeaders: readonly string[]): Promise<Authenticated | Denial>;
}

/**
 * Authentication, in order; the first failing step decides:
 *   credentials (40004/40107) → token shape and claims (40106) → time window (40106)
 *   → key exists, active, not expired (10013) → signature (40106) → replay guard (40106).
 * Cheap checks come before crypto and store round trips. The nonce is recorded
 * only once the signature is good, so forged tokens cannot burn nonces.
 * Store failures throw StoreUnavailableError (→ 503); they never pass.
 */
export function createAuthenticator(options: DecodeOptions, deps: { keys: KeyCache; store: Store; clock: Clock }): Authenticator {
  return async function authenticate(rawHeaders) {
    const credentials = readCredentials(rawHeaders);
    if (!credentials.ok) return credentials;
    const claims = decodeToken(credentials.token, options);
    if (!claims.ok) return claims;
    const timing = checkTime(claims, deps.clock.nowNs());
    if (!timing.ok) return timing;

    const key = await deps.keys.get(claims.sub);
    if (!key) return deny('unknown_key');
    const nowMs = deps.clock.nowMs();
    if (key.record.state !== 'active') return deny('revoked');
    if (nowMs >= key.expiresAtMs) return deny('expired_key');

    const signature = verifySignature(credentials.token, key.verifyKeys, nowMs);
    if (!signature.ok) return signature;

    const first = await deps.store.recordNonce(key.record.apiKey, claims.nonce, timing.nonceTtlMs);
    if (!first) return deny('replay');
    return { ok: true, key };
  };
}
