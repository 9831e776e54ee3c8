import type { KeyRecord } from '../keys/key-record.js';

/** A key's effective home and when it last moved (ms since the epoch, keystore TIME; 0: never moved). */
export interface EffectiveHome {
  readonly home: string;
  readonly movedAtMs: number;
}

/** What the owners table knows of an owner's home (undefined home: the default). */
export interface OwnerHomeRecord {
  readonly home?: string | undefined;
  readonly movedAtMs: number;
}

/**
 * Where a key's admit runs (docs/regions.md "Homes"). A key with an owner lives where its owner does (the
 * owner's budget and its keys' budgets are charged in one script, on one Redis): the owner's home, or the
 * default home when the owner has none; the key's own `home` is kept equal to that by the key operations.
 * A key without an owner: its own `home`, else the default (a key written before regions existed).
 */
export function effectiveHome(
  record: Pick<KeyRecord, 'owner' | 'home' | 'homeMovedAtMs'>,
  owner: OwnerHomeRecord | undefined,
  defaultHome: string,
): EffectiveHome {
  if (record.owner !== undefined)
    return { home: owner?.home ?? defaultHome, movedAtMs: Math.max(owner?.movedAtMs ?? 0, record.homeMovedAtMs ?? 0) };
  return { home: record.home ?? defaultHome, movedAtMs: record.homeMovedAtMs ?? 0 };
}

/**
 * The last nonce time (ns) a moved home refuses: the old home may have admitted any nonce up to the move plus the
 * largest recv_window (a token dated that far ahead was inside its window there) plus the staleness bound (an
 * instance elsewhere may still route to the old home that long after the move, or it refuses everything).
 * 0n when the home never moved.
 */
export function movedCutoffNs(movedAtMs: number, maxRecvWindowMs: number, maxStalenessMs: number): bigint {
  if (movedAtMs <= 0) return 0n;
  return BigInt(movedAtMs + maxRecvWindowMs + maxStalenessMs) * 1_000_000n;
}
