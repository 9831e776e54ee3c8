import type { Clock } from '../clock.js';
import { deny, type Denial } from '../errors.js';
import type { KeyCache } from '../store/key-cache.js';
import type { PreparedKey } from '../keys/prepared-key.js';
import type { KeyAlg } from '../keys/public-key.js';
import type { CompiledLimit } from '../policy/rate-limit-spec.js';
import type { RateState } from '../store/rate-limit.js';
import type { ReplayFence } from '../store/replay-fence.js';
import type { Admission, AdmissionStore } from '../store/store.js';
import { checkBinding, type BoundRequest } from './check-binding.js';
import { checkTime, type Timing } from './check-time.js';
import { decodeToken, type Claims, type DecodeOptions } from './decode-token.js';
import type { BodyFraming } from './forward-headers.js';
import { chargeOf, type KeyCharge } from './key-charge.js';
import { readCredentials } from './read-credentials.js';
import { verifySignature } from './verify-signature.js';

/**
 * The budgets that applied to a request and where it stands against each, in cost units (for the
 * RateLimit headers, which list every one): the key's, its owner's, or the client IP's
 * failed-authentication budget on an `ip_blocked` refusal. `limits[i]` goes with `states[i]`.
 */
export interface RateInfo {
  readonly limits: readonly CompiledLimit[];
  readonly states: readonly RateState[];
}

/**
 * What the request path knows of a request before authentication (its walk, passed as it is): the
 * route, whose cost the admit step spends (1 when absent), and the client IP (ip-budget.ts).
 */
export interface AuthRequest {
  readonly route?: { readonly cost?: number | undefined } | undefined;
  readonly ip?: string | undefined;
  /** What a token's binding claims are compared with: the method, the target as sent, the body framing. */
  readonly method?: string | undefined;
  readonly asked?: { readonly url: string | undefined } | undefined;
  readonly head?: { readonly body: BodyFraming } | undefined;
}

export interface Authenticated {
  readonly ok: true;
  readonly key: PreparedKey;
  /** The alg the token was signed with (its key's, or during a rotation's grace the previous credential's). */
  readonly alg: KeyAlg;
  /** Present when a rate limit applies to the key. */
  readonly rate: RateInfo | undefined;
  /** The token's body_sha256 when the body must be read and checked before anything is forwarded. */
  readonly bodySha256?: string | undefined;
  /** Which of the key's credentials verified the token (VerifyKey.id): a stream it opens ends with that credential. */
  readonly credential: string;
}

/**
 * A refusal once the signature verified (replay, fenced, rate limited): the key is proven, so its
 * id is logged with the refusal (docs/running.md; the KeygateReplaySpike alert points there).
 */
export type VerifiedDenial = Denial & { readonly keyId: string };

/** 429 rate_limited / owner_rate_limited, with what the client needs to back off (Retry-After, RateLimit). */
export type RateLimited = VerifiedDenial & { readonly rate: RateInfo };

/** What authentication decided. */
export type AuthResult = Authenticated | Denial | VerifiedDenial | RateLimited;

/**
 * The decision itself when every answer was known at once (a cached key on the embedded store),
 * else a promise of it. A caller handles both, and a synchronous throw as it would a rejection.
 */
export interface Authenticator {
  (rawHeaders: readonly string[], request?: AuthRequest): AuthResult | Promise<AuthResult>;
}

export interface AuthenticateOptions extends DecodeOptions {
  /** The policy's defaultRateLimit, for keys without their own. */
  readonly defaultRateLimit: CompiledLimit | undefined;
  /** The policy's defaultOwnerRateLimit, for owners without their own. */
  readonly defaultOwnerRateLimit?: CompiledLimit | undefined;
  /** Forward-auth: the request body never reaches Keygate, so a body_sha256 claim is refused (check-binding.ts). */
  readonly bodyUnseen?: boolean;
}

/** An owner's own limit, if it has one (the keys file's `owners`, or `keygate owners set` in Redis). */
export type OwnerLimits = (owner: string) => CompiledLimit | undefined;

/**
 * Authentication, in order; the first failing step decides:
 *   credentials (40004/40107) → token shape and claims (40106) → time window and replay fence (40106)
 *   → key exists, active, not expired (10013) → signature (40106) → binding (40106, check-binding.ts)
 *   → the key's and its owner's budgets, for the route's cost (10429) → replay guard (40106).
 * Cheap checks come before crypto and store round trips. The last two are one
 * store call (Store.admit, one Redis round trip), made only once the signature
 * is good: a forged token neither burns a nonce nor spends a key's allowance,
 * and a limited token is not burned, so it may be retried once allowed.
 * Store failures throw StoreUnavailableError (→ 503); they never pass.
 */
export function createAuthenticator(
  options: AuthenticateOptions,
  deps: { keys: KeyCache; store: AdmissionStore; clock: Clock; fence?: ReplayFence; ownerLimits?: OwnerLimits },
): Authenticator {
  const fence = deps.fence;
  /**
   * What the admit step charges (budgets.ts): the route's cost from the key's budget and its owner's,
   * whichever apply. Undefined when neither applies and the key has no owner (the nonce alone, as before).
   * Prepared once per key and limits (key-charge.ts): a request only picks the Charge for its cost.
   */
  function chargeFor(key: PreparedKey, cost: number): KeyCharge | undefined {
    const owner = key.record.owner;
    const ownerLimit = owner === undefined ? undefined : (deps.ownerLimits?.(owner) ?? options.defaultOwnerRateLimit);
    return chargeOf(key, key.rateLimit ?? options.defaultRateLimit, ownerLimit, cost);
  }
  // Synchronous while every answer is known at once (a cached key, the embedded store): no promise
  // and no microtask turn per request. A key read or a Redis admit makes the rest a promise.
  return function authenticate(rawHeaders, request) {
    const credentials = readCredentials(rawHeaders);
    if (!credentials.ok) return credentials;
    const claims = decodeToken(credentials.token, options);
    if (!claims.ok) return claims;
    const timing = checkTime(claims, deps.clock.nowNs(), fence?.fenceNs());
    if (!timing.ok) return timing;
    const key = deps.keys.get(claims.sub);
    if (key instanceof Promise) return key.then((k) => withKey(k, credentials.token, claims, timing, request));
    return withKey(key, credentials.token, claims, timing, request);
  };

  function withKey(
    key: PreparedKey | null,
    token: string,
    claims: Claims,
    timing: Timing,
    request: AuthRequest | undefined,
  ): AuthResult | Promise<AuthResult> {
    if (!key) return deny('unknown_key');
    const nowMs = deps.clock.nowMs();
    if (key.record.state !== 'active') return deny('revoked');
    if (nowMs >= key.expiresAtMs) return deny('expired_key');

    const signature = verifySignature(token, claims.alg, key.verifyKeys, nowMs);
    if (!signature.ok) return signature;
    // Before the admit: a token presented with another method or target burns no nonce (check-binding.ts).
    let bodySha256: string | undefined;
    if (
      key.record.binding !== undefined ||
      claims.method !== undefined ||
      claims.path !== undefined ||
      claims.bodySha256 !== undefined
    ) {
      const bound = checkBinding(claims, key.record.binding, boundRequest(request));
      if (!bound.ok) return { ...bound, keyId: key.record.id };
      bodySha256 = bound.bodySha256;
    }

    const charge = chargeFor(key, request?.route?.cost ?? 1);
    // A cost above a budget's burst never fits, however long the client waits: refused without a
    // Retry-After (nothing spent, the nonce not burnt), under its own reason for the operator.
    if (charge !== undefined && exceedsBurst(charge)) return { ...deny('cost_exceeds_burst'), keyId: key.record.id };
    const admission = deps.store.admit(
      key.record.apiKey,
      claims.nonce,
      timing.nonceTtlMs,
      charge,
      key.record,
      claims.nonceNs,
    );
    const credential = signature.credential.id;
    if (admission instanceof Promise)
      return admission.then((a) => decide(a, key, claims, charge, bodySha256, credential));
    return decide(admission, key, claims, charge, bodySha256, credential);
  }

  function decide(
    admission: Admission,
    key: PreparedKey,
    claims: Claims,
    charge: KeyCharge | undefined,
    bodySha256: string | undefined,
    credential: string,
  ): AuthResult {
    const keyId = key.record.id;
    if (admission.outcome === 'replay') return { ...deny('replay'), keyId };
    if (admission.outcome === 'home_moved') return { ...deny('home_moved'), keyId };
    if (admission.outcome === 'fenced') return { ...deny('fenced'), keyId };
    // Checked again on the answer: a failover seen while the admit was under way (the fence goes up
    // before any command reaches the new master) may have put this nonce on a master that never
    // knew it was used. The nonce is burnt; the client signs again.
    if (fence && claims.nonceNs < fence.fenceNs()) return { ...deny('fenced'), keyId };
    if (admission.outcome === 'limited') {
      const { budgets, limits } = charge as KeyCharge;
      // Named by the first budget without room: the key's own, or its owner's (own metric label and log reason).
      const refusal =
        budgets[admission.refusedBy]?.kind === 'owner' ? deny('owner_rate_limited') : deny('rate_limited');
      return { ...refusal, keyId, rate: { limits, states: admission.rate } };
    }
    const rate = admission.rate && charge && { limits: charge.limits, states: admission.rate };
    return { ok: true, key, alg: claims.alg, rate, bodySha256, credential };
  }

  function exceedsBurst(charge: KeyCharge): boolean {
    for (const b of charge.budgets) if (charge.cost > b.limit.burst) return true;
    return false;
  }

  /** The request as the binding claims see it; a caller that gives none matches no claim (fail closed). */
  function boundRequest(request: AuthRequest | undefined): BoundRequest {
    const framing = request?.head?.body ?? 'none';
    return {
      method: request?.method ?? '',
      target: request?.asked?.url ?? '',
      body: options.bodyUnseen ? 'unseen' : framing === 'none' || framing === 0 ? 'none' : 'present',
    };
  }
}
