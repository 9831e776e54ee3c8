import { deny, type Denial } from '../errors.js';
import type { Claims } from './decode-token.js';

export interface Timing {
  readonly ok: true;
  /** How long the replay guard must remember this nonce, in ms. */
  readonly nonceTtlMs: number;
}

/** Extra memory for the replay guard, to cover clock skew between replicas. */
export const NONCE_TTL_MARGIN_MS = 1_000;

/**
 * |nonce − now| must be strictly less than recv_window seconds; `exp` (if any)
 * must be in the future and `nbf` (if any) not. Compared as BigInt: a
 * nanosecond timestamp has 19 digits, beyond 2^53.
 */
export function checkTime(claims: Claims, nowNs: bigint): Timing | Denial {
  const windowNs = BigInt(claims.recvWindowSeconds) * 1_000_000_000n;
  const diff = claims.nonceNs - nowNs;
  if (diff >= windowNs || -diff >= windowNs) return deny('nonce_window');
  const nowSeconds = Number(nowNs / 1_000_000n) / 1000;
  if (claims.exp !== undefined && nowSeconds >= claims.exp) return deny('expired');
  if (claims.nbf !== undefined && nowSeconds < claims.nbf) return deny('expired');
  // The nonce stays acceptable until now reaches nonce + window.
  const nonceTtlMs = Number((claims.nonceNs + windowNs - nowNs) / 1_000_000n) + NONCE_TTL_MARGIN_MS;
  return { ok: true, nonceTtlMs };
}
