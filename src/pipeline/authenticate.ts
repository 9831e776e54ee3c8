import type { Clock } from '../clock.js';
import { deny, type Denial } from '../errors.js';
import type { KeyCache } from '../store/key-cache.js';
import type { PreparedKey } from '../keys/prepared-key.js';
import type { KeyAlg } from '../keys/public-key.js';
import type { KeyRecord } from '../keys/key-record.js';
import type { CompiledLimit } from '../policy/rate-limit-spec.js';
import type { RateState } from '../store/rate-limit.js';
import type { ReplayFence } from '../store/replay-fence.js';
import type { Admission, AdmissionStore, CreditState } from '../store/store.js';
import type { CompiledCredits } from '../keys/credits.js';
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
  /** The quotas (credits: the key's, its owner's) and what is left of each; absent when none applies. */
  readonly credits?: readonly CompiledCredits[];
  readonly creditStates?: readonly CreditState[];
  /** A credits_exhausted refusal: which quota (an index in `credits`) refused it; Retry-After is its refill. */
  readonly exhaustedBy?: number;
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
  /** Called right before the store's admit (its round trip, with Redis) begins: tracing's CLIENT span starts there. */
  admitting?(): void;
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
 * id is logged with the refusal (docs/running.md; the KeygateReplaySpike alert points there), and the
 * refusal is counted in the key's usage by outcome (its record: the apiKey and owner it is counted under).
 */
export type VerifiedDenial = Denial & { readonly keyId: string; readonly record: KeyRecord };

/** 429 rate_limited / owner_rate_limited / cost_exceeds_burst, with what the client needs to back off (Retry-After, RateLimit). */
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

/** An owner's credits, if it has any (Store.ownerCredits). */
export type OwnerCredits = (owner: string) => CompiledCredits | undefined;

/**
 * Told when an admitted request took credits to zero (Admission.drained): the key's (`key`) and/or its
 * owner's (`owner`). Called after the decision, once per transition across every instance (the store's
 * atomic step reports it); the listener raises the event off the request path.
 */
export type CreditsDrained = (record: KeyRecord, which: { key: boolean; owner: boolean }) => void;

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
  deps: {
    keys: KeyCache;
    store: AdmissionStore;
    clock: Clock;
    fence?: ReplayFence;
    ownerLimits?: OwnerLimits;
    ownerCredits?: OwnerCredits;
    onCreditsDrained?: CreditsDrained;
  },
): Authenticator {
  const fence = deps.fence;
  /**
   * What the admit step charges (budgets.ts): the route's cost from the key's budget and its owner's,
   * whichever apply. Undefined when neither applies and the key has no owner (the nonce alone, as before).
   * Prepared once per key and limits (key-charge.ts): a request only picks the Charge for its cost.
   */
  function chargeFor(key: PreparedKey, cost: number): KeyCharge | undefined {
    const owner = key.record.owner;
    if (owner === undefined) return chargeOf(key, key.rateLimit ?? options.defaultRateLimit, undefined, cost);
    const ownerLimit = deps.ownerLimits?.(owner) ?? options.defaultOwnerRateLimit;
    return chargeOf(key, key.rateLimit ?? options.defaultRateLimit, ownerLimit, cost, deps.ownerCredits?.(owner));
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
      if (!bound.ok) return { ...bound, keyId: key.record.id, record: key.record };
      bodySha256 = bound.bodySha256;
    }

    const charge = chargeFor(key, request?.route?.cost ?? 1);
    request?.admitting?.();
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
    const record = key.record;
    if (admission.outcome === 'replay') return { ...deny('replay'), keyId, record };
    if (admission.outcome === 'home_moved') return { ...deny('home_moved'), keyId, record };
    if (admission.outcome === 'fenced') return { ...deny('fenced'), keyId, record };
    // Checked again on the answer: a failover seen while the admit was under way (the fence goes up
    // before any command reaches the new master) may have put this nonce on a master that never
    // knew it was used. The nonce is burnt; the client signs again.
    if (fence && claims.nonceNs < fence.fenceNs()) return { ...deny('fenced'), keyId, record };
    if (admission.outcome === 'limited') {
      const { budgets, limits } = charge as KeyCharge;
      // A cost above a budget's burst never fits, however long the client waits: the admit refused it (nothing
      // spent, the nonce not burnt) and said where every budget stands, so the 429 carries the RateLimit fields,
      // under its own reason and message and without a Retry-After. Otherwise named by the first budget without
      // room: the key's own, or its owner's (own metric label and log reason).
      const refusal = exceedsBurst(charge as KeyCharge)
        ? deny('cost_exceeds_burst')
        : budgets[admission.refusedBy]?.kind === 'owner'
          ? deny('owner_rate_limited')
          : deny('rate_limited');
      return { ...refusal, keyId, record, rate: { limits, states: admission.rate } };
    }
    if (admission.outcome === 'exhausted') {
      const { limits, credits } = charge as KeyCharge;
      return {
        ...deny('credits_exhausted'),
        keyId,
        record,
        rate: {
          limits,
          states: admission.rate,
          credits: creditSpecs(credits),
          creditStates: admission.credits,
          exhaustedBy: admission.refusedBy,
        },
      };
    }
    if (admission.credits !== undefined && charge !== undefined) {
      if (admission.drained !== undefined) {
        const kinds = charge.credits ?? [];
        const hit = (kind: string) => kinds.some((c, j) => c.kind === kind && (admission.drained! & (1 << j)) !== 0);
        deps.onCreditsDrained?.(key.record, { key: hit('key'), owner: hit('owner') });
      }
      const rate: RateInfo = {
        limits: charge.limits,
        states: admission.rate ?? [],
        credits: creditSpecs(charge.credits),
        creditStates: admission.credits,
      };
      return { ok: true, key, alg: claims.alg, rate, bodySha256, credential };
    }
    const rate = admission.rate && charge && { limits: charge.limits, states: admission.rate };
    return { ok: true, key, alg: claims.alg, rate, bodySha256, credential };
  }

  function creditSpecs(credits: KeyCharge['credits']): readonly CompiledCredits[] {
    return credits === undefined ? [] : credits.map((c) => c.spec);
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
