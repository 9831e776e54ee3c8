import type { CompiledLimit } from '../policy/rate-limit-spec.js';

/**
 * Per-key rate limits: GCRA (the generic cell-rate algorithm) as a pure step,
 * over a limit compiled from what the operator wrote (src/policy/rate-limit-spec.ts).
 *
 * GCRA keeps one number per key, the theoretical arrival time (TAT): when the
 * key's allowance would be fully spent if requests kept arriving at exactly the
 * limit. A request passes when, after adding one emission interval T, the TAT
 * is no more than `burst * T` ahead of now. So a fresh key passes exactly
 * `burst` requests at once, then one every T; over any span of length d it
 * passes at most `burst + d / T`. There are no windows, hence no doubling at a
 * window's edge.
 *
 * Everything is in integer microseconds: the Redis script (admit-script.ts)
 * does the same arithmetic on Lua doubles, which hold these integers exactly,
 * so both stores decide identically.
 */

/** What a limit check leaves behind, for the RateLimit / Retry-After headers. */
export interface RateState {
  /** Requests that could pass right now (after this one, when it passed). */
  readonly remaining: number;
  /** Until the whole burst is available again, in µs. */
  readonly resetUs: number;
  /** Until the next request can pass, in µs; 0 when one can pass now. */
  readonly retryAfterUs: number;
}

export type GcraStep =
  | { readonly allowed: true; readonly tatUs: number; readonly state: RateState }
  | { readonly allowed: false; readonly state: RateState };

/**
 * One GCRA decision. `storedTatUs` is the key's stored TAT (0 or anything in the
 * past for a key at rest). On `allowed` the caller stores `tatUs` (it may expire
 * at tatUs: a TAT in the past means the same as no TAT).
 */
export function gcra(storedTatUs: number, nowUs: number, limit: CompiledLimit): GcraStep {
  const tat = storedTatUs > nowUs ? storedTatUs : nowUs;
  const next = tat + limit.intervalUs;
  const capacity = limit.burst * limit.intervalUs;
  if (next - nowUs > capacity) {
    return { allowed: false, state: { remaining: 0, resetUs: tat - nowUs, retryAfterUs: next - nowUs - capacity } };
  }
  return {
    allowed: true,
    tatUs: next,
    state: {
      remaining: Math.floor((capacity - (next - nowUs)) / limit.intervalUs),
      resetUs: next - nowUs,
      retryAfterUs: 0,
    },
  };
}
