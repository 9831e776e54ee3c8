import type { Clock } from '../clock.js';
import { deny, type Denial } from '../errors.js';
import type { KeyCache } from '../store/key-cache.js';
import type { PreparedKey } from '../keys/prepared-key.js';
import type { KeyAlg } from '../keys/public-key.js';
import type { CompiledLimit } from '../policy/rate-limit-spec.js';
import type { RateState } from '../store/rate-limit.js';
import type { ReplayFence } from '../store/replay-fence.js';
import type { Store } from '../store/store.js';
import { checkTime } from './check-time.js';
import { decodeToken, type DecodeOptions } from './decode-token.js';
import { readCredentials } from './read-credentials.js';
import { verifySignature } from './verify-signature.js';

/** The limit that applied to a request and where the key stands against it (for the RateLimit headers). */
export interface RateInfo {
  readonly limit: CompiledLimit;
  readonly state: RateState;
}

export interface Authenticated {
  readonly ok: true;
  readonly key: PreparedKey;
  /** The alg the token was signed with (its key's, or during a rotation's grace the previous credential's). */
  readonly alg: KeyAlg;
  /** Present when a rate limit applies to the key. */
  readonly rate: RateInfo | undefined;
}

/**
 * A refusal once the signature verified (replay, fenced, rate limited): the key is proven, so its
 * id is logged with the refusal (docs/running.md; the KeygateReplaySpike alert points there).
 */
export type VerifiedDenial = Denial & { readonly keyId: string };

/** 429 rate_limited, with what the client needs to back off (Retry-After, RateLimit). */
export type RateLimited = VerifiedDenial & { readonly rate: RateInfo };

export interface Authenticator {
  (rawHeaders: readonly string[]): Promise<Authenticated | Denial | VerifiedDenial | RateLimited>;
}

export interface AuthenticateOptions extends DecodeOptions {
  /** The policy's defaultRateLimit, for keys without their own. */
  readonly defaultRateLimit: CompiledLimit | undefined;
}

/**
 * Authentication, in order; the first failing step decides:
 *   credentials (40004/40107) → token shape and claims (40106) → time window and replay fence (40106)
 *   → key exists, active, not expired (10013) → signature (40106)
 *   → rate limit (10429) → replay guard (40106).
 * Cheap checks come before crypto and store round trips. The last two are one
 * store call (Store.admit, one Redis round trip), made only once the signature
 * is good: a forged token neither burns a nonce nor spends a key's allowance,
 * and a limited token is not burned, so it may be retried once allowed.
 * Store failures throw StoreUnavailableError (→ 503); they never pass.
 */
export function createAuthenticator(
  options: AuthenticateOptions,
  deps: { keys: KeyCache; store: Store; clock: Clock; fence?: ReplayFence },
): Authenticator {
  const fence = deps.fence;
  return async function authenticate(rawHeaders) {
    const credentials = readCredentials(rawHeaders);
    if (!credentials.ok) return credentials;
    const claims = decodeToken(credentials.token, options);
    if (!claims.ok) return claims;
    const timing = checkTime(claims, deps.clock.nowNs(), fence?.fenceNs());
    if (!timing.ok) return timing;

    const key = await deps.keys.get(claims.sub);
    if (!key) return deny('unknown_key');
    const nowMs = deps.clock.nowMs();
    if (key.record.state !== 'active') return deny('revoked');
    if (nowMs >= key.expiresAtMs) return deny('expired_key');

    const signature = verifySignature(credentials.token, claims.alg, key.verifyKeys, nowMs);
    if (!signature.ok) return signature;

    const limit = key.rateLimit ?? options.defaultRateLimit;
    const admission = await deps.store.admit(key.record.apiKey, claims.nonce, timing.nonceTtlMs, limit);
    const keyId = key.record.id;
    if (admission.outcome === 'replay') return { ...deny('replay'), keyId };
    // Checked again on the answer: a failover seen while the admit was under way (the fence goes up
    // before any command reaches the new master) may have put this nonce on a master that never
    // knew it was used. The nonce is burnt; the client signs again.
    if (fence && claims.nonceNs < fence.fenceNs()) return { ...deny('fenced'), keyId };
    if (admission.outcome === 'limited')
      return { ...deny('rate_limited'), keyId, rate: { limit: limit as CompiledLimit, state: admission.rate } };
    return { ok: true, key, alg: claims.alg, rate: limit && admission.rate && { limit, state: admission.rate } };
  };
}
