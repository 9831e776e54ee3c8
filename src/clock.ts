/** Injected time source, so tests can drive the nonce window, expiry and caches. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  nowMs(): number;
  /** Nanoseconds since the Unix epoch. */
  nowNs(): bigint;
}

/**
 * The wall clock. Millisecond resolution is ample for a window of seconds, and
 * unlike a monotonic timer it follows NTP corrections, as clients' clocks do.
 */
export function systemClock(): Clock {
  return {
    nowMs: () => Date.now(),
    nowNs: () => BigInt(Date.now()) * 1_000_000n,
  };
}

/** A clock that only moves when told to (tests). */
export function manualClock(startMs = Date.now()): Clock & { advance(ms: number): void; set(ms: number): void } {
  let nowNs = BigInt(Math.round(startMs * 1e6));
  return {
    nowMs: () => Number(nowNs / 1_000_000n),
    nowNs: () => nowNs,
    advance(ms) {
      nowNs += BigInt(Math.round(ms * 1e6));
    },
    set(ms) {
      nowNs = BigInt(Math.round(ms * 1e6));
    },
  };
}
