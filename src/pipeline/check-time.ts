import { deny, type Denial } from '../errors.js';
import type { Claims } from './decode-token.js';

export interface Timing {
  readonly ok: true;
  /** How long the replay guard must remember this nonce, in ms. */
  readonly nonceTtlMs: number;
}

/**
 * The clock skew between Keygate instances the replay guard tolerates. Instances whose clocks
 * differ by S accept one nonce over at most 2 × window + S of real time (each accepts it for
 * 2 × window, shifted by its skew), so the entry must live that long from its first admission.
 */
export const NONCE_TTL_MARGIN_MS = 5_000;

/**
 * |nonce − now| must be strictly less than recv_window seconds; the nonce must not be older than
 * the replay fence (`fenceNs`, the moment this instance last saw a Redis failover: replay-fence.ts;
 * 0n when none); `exp` (if any) must be in the future and `nbf` (if any) not. Compared as BigInt: a
 * nanosecond timestamp has 19 digits, beyond 2^53.
 */
export function checkTime(claims: Claims, nowNs: bigint, fenceNs = 0n): Timing | Denial {
  const windowNs = BigInt(claims.recvWindowSeconds) * 1_000_000_000n;
  const diff = claims.nonceNs - nowNs;
  if (diff >= windowNs || -diff >= windowNs) return deny('nonce_window');
  // After the window: a fenced refusal is one the window alone would have let through.
  if (claims.nonceNs < fenceNs) return deny('fenced');
  const nowSeconds = Number(nowNs / 1_000_000n) / 1000;
  if (claims.exp !== undefined && nowSeconds >= claims.exp) return deny('expired');
  if (claims.nbf !== undefined && nowSeconds < claims.nbf) return deny('expired');
  // The entry's lifetime depends on no instance's clock (never on nonce − now): 2 × window covers
  // every instant some instance with this one's clock could accept the nonce, the margin covers
  // the skew between instances. The admit step stays one command (no Redis TIME for it).
  return { ok: true, nonceTtlMs: claims.recvWindowSeconds * 2_000 + NONCE_TTL_MARGIN_MS };
}
