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

/**
 * Milliseconds as nanoseconds, exactly for whole ms: an epoch time in ms times 1e6 is past 2^53, where a double
 * cannot hold every integer (1795880752465 * 1e6 came out 1 ms early).
 */
const nsOf = (ms: number): bigint => {
  const whole = Math.floor(ms);
  return BigInt(whole) * 1_000_000n + BigInt(Math.round((ms - whole) * 1e6));
};

/** A clock that only moves when told to (tests). */
export function manualClock(startMs = Date.now()): Clock & { advance(ms: number): void; set(ms: number): void } {
  let nowNs = nsOf(startMs);
  return {
    nowMs: () => Number(nowNs / 1_000_000n),
    nowNs: () => nowNs,
    advance(ms) {
      nowNs += nsOf(ms);
    },
    set(ms) {
      nowNs = nsOf(ms);
    },
  };
}
