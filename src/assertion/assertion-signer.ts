import { sign, type KeyObject } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { AssertionKey, AssertionKeySet } from './assertion-keys.js';
import type { KeyRecord } from '../keys/key-record.js';

/** The header the upstream reads; client copies are dropped like the identity headers (forward-headers.ts). */
export const ASSERTION_HEADER = 'x-keygate-assertion';
/** The JWS `typ`: a verifier that checks it cannot be handed some other JWT signed by the same keys. */
export const ASSERTION_TYP = 'keygate-assertion+jwt';

export interface AssertionOptions {
  readonly audience: string;
  readonly issuer: string;
  readonly ttlSeconds: number;
  readonly mode: 'identity' | 'request';
  /** Most keys whose identity assertion is kept (the key cache's own bound). */
  readonly maxEntries: number;
}

/** What a request-bound assertion names (DPoP's claim names): the request id, the method and the target as forwarded. */
export interface AssertedRequest {
  readonly requestId: string;
  readonly method: string;
  /** Origin-form, as forwarded: path and query. */
  readonly target: string;
}

export interface AssertionSigner {
  /** The assertion for a request that passed with this key: a compact JWS. */
  sign(record: KeyRecord, request: AssertedRequest): string;
}

interface CachedAssertion {
  token: string;
  /** The record it was signed for: the same object means the same identity, without comparing fields. */
  record: KeyRecord;
  readonly signing: AssertionKey;
  readonly owner: string | undefined;
  readonly scope: string;
  /** The bounds its exp was computed from: a change of either re-signs. */
  readonly expiresAt: string | undefined;
  readonly state: KeyRecord['state'];
  readonly refreshAtMs: number;
}

const b64url = (data: string | Buffer) => Buffer.from(data).toString('base64url');

/**
 * Signs X-Keygate-Assertion. Identity mode: the assertion depends only on the key's identity (id,
 * owner, scopes), its bounds (expiry, state) and the signing key, so it is kept per key and re-signed
 * once three quarters of its lifetime are gone (an upstream always gets at least a quarter of the
 * TTL), at once when the key's identity or bounds change or another key signs. Every instance
 * compares the record its own key cache holds, which a change message replaces on each of them. Request mode adds jti/htm/htu and signs every time.
 *
 * Signing is node:crypto's synchronous sign: the request path gets its answer in the same turn,
 * with no Promise per request (jose's SignJWT is async); the JWS is three base64url parts.
 */
export function createAssertionSigner(
  options: AssertionOptions,
  deps: {
    clock: Clock;
    keys: () => AssertionKeySet;
    events?: { onSigned?: (mode: 'identity' | 'request') => void; onCacheHit?: () => void };
  },
): AssertionSigner {
  const { audience, issuer, ttlSeconds, mode } = options;
  const cache = new Map<string, CachedAssertion>();
  // The encoded JWS header per signing key, made once.
  const headers = new WeakMap<AssertionKey, string>();
  const headerOf = (key: AssertionKey) => {
    let h = headers.get(key);
    if (h === undefined)
      headers.set(key, (h = b64url(JSON.stringify({ alg: key.alg, kid: key.kid, typ: ASSERTION_TYP }))));
    return h;
  };

  function jws(key: AssertionKey, claims: Record<string, unknown>): string {
    const input = `${headerOf(key)}.${b64url(JSON.stringify(claims))}`;
    const privateKey = key.privateKey as KeyObject;
    const signature =
      key.alg === 'EdDSA'
        ? sign(null, Buffer.from(input), privateKey)
        : sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' });
    return `${input}.${signature.toString('base64url')}`;
  }

  function identityClaims(record: KeyRecord, scope: string, nowMs: number) {
    const iat = Math.floor(nowMs / 1000);
    let exp = iat + ttlSeconds;
    // Never outlive the key itself: an expired key's assertion must not keep working upstream.
    if (record.expiresAt !== undefined) {
      const keyExp = Math.floor(Date.parse(record.expiresAt) / 1000);
      // exp = min(now + TTL, the key's expiry), never past it (a key expiring within this second
      // gets exp = iat: expired at once for a verifier without leeway, as the key nearly is).
      if (Number.isFinite(keyExp) && keyExp < exp) exp = keyExp;
    }
    return {
      iss: issuer,
      aud: audience,
      sub: record.id,
      ...(record.owner !== undefined && { owner: record.owner }),
      scope,
      iat,
      exp,
    };
  }

  return {
    sign(record, request) {
      const signing = deps.keys().signing;
      const nowMs = deps.clock.nowMs();
      if (mode === 'request') {
        const claims = identityClaims(record, record.scopes.join(' '), nowMs);
        deps.events?.onSigned?.('request');
        return jws(signing, { ...claims, jti: request.requestId, htm: request.method, htu: request.target });
      }
      const hit = cache.get(record.id);
      if (hit !== undefined && hit.signing === signing && nowMs < hit.refreshAtMs) {
        if (
          hit.record === record ||
          (hit.owner === record.owner &&
            hit.scope === record.scopes.join(' ') &&
            hit.expiresAt === record.expiresAt &&
            hit.state === record.state)
        ) {
          hit.record = record;
          deps.events?.onCacheHit?.();
          return hit.token;
        }
      }
      const scope = record.scopes.join(' ');
      const claims = identityClaims(record, scope, nowMs);
      const token = jws(signing, claims);
      deps.events?.onSigned?.('identity');
      const lifetimeMs = (claims.exp - claims.iat) * 1000;
      const refreshAtMs = claims.iat * 1000 + Math.floor(lifetimeMs * 0.75);
      cache.delete(record.id);
      // Oldest first out: Map keeps insertion order, and a re-signed key moves to the end.
      if (cache.size >= options.maxEntries) cache.delete(cache.keys().next().value as string);
      cache.set(record.id, {
        token,
        record,
        signing,
        owner: record.owner,
        scope,
        expiresAt: record.expiresAt,
        state: record.state,
        refreshAtMs,
      });
      return token;
    },
  };
}
