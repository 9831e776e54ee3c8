import { MAX_CREDITS, periodEndSec, periodOf, type CompiledCredits } from '../keys/credits.js';

/**
 * The credits balance as the admit step keeps it (memory store; the Redis admit script does the same
 * arithmetic in Lua, admit-script.ts, on a hash `r`, `p`, `g`, `s`, `i` beside the key's nonces):
 *   r  what is left
 *   p  the refill period `r` belongs to (keys/credits.ts periodOf)
 *   g  the set it started from (the record's `setAt`), s its value and i its interval
 * A refill is lazy: a balance read in a later period than `p` counts as `amount` (the refill sets, it does not
 * add), so nothing runs at midnight. A record whose set is newer than the balance's (a larger `setAt`, or
 * the same with another value or interval: a keys file edited) starts the balance again from the record;
 * an older one (a stale cached copy on another instance) changes nothing.
 */
export interface CreditBalance {
  readonly r: number;
  readonly p: number;
  readonly g: number;
  readonly s: number;
  readonly i: number;
}

/** What is left and when it is refilled, as the admit step answers it (RateLimit fields, Retry-After). */
export interface CreditState {
  readonly remaining: number;
  /** Seconds until the next refill; -1 when there is none (no retry can help). */
  readonly refillInS: number;
}

/** The balance as it counts at `nowSec`: started from the record's set if that is newer, refilled if its period passed. */
export function balanceNow(stored: CreditBalance | undefined, c: CompiledCredits, nowSec: number): CreditBalance {
  let b = stored;
  if (b === undefined || b.g < c.gen || (b.g === c.gen && (b.s !== c.remaining || b.i !== c.interval)))
    b = {
      r: c.remaining,
      p: periodOf(c.interval, c.gen > 0 ? Math.floor(c.gen / 1000) : nowSec),
      g: c.gen,
      s: c.remaining,
      i: c.interval,
    };
  if (c.interval !== 0) {
    const current = periodOf(c.interval, nowSec);
    if (b.p < current) b = { ...b, r: c.amount, p: current };
  }
  return b;
}

export function creditState(b: CreditBalance, c: CompiledCredits, nowSec: number): CreditState {
  return { remaining: b.r, refillInS: c.interval === 0 ? -1 : periodEndSec(c.interval, b.p) - nowSec };
}

export type CreditStep =
  | {
      readonly allowed: true;
      /** The balances to store once the rest of the admit passed too. */
      readonly next: readonly CreditBalance[];
      readonly states: readonly CreditState[];
      /** Bit j set: credits j reach zero with this spend (a `key.credits_exhausted` event, once per transition). */
      readonly drained: number;
    }
  | { readonly allowed: false; readonly refusedBy: number; readonly states: readonly CreditState[] };

/**
 * One decision over a request's credits (the key's, then its owner's): the cost is spent from every one
 * only when every one has it; otherwise from none.
 */
export function chargeCredits(
  stored: readonly (CreditBalance | undefined)[],
  nowSec: number,
  credits: readonly CompiledCredits[],
  cost: number,
): CreditStep {
  const n = credits.length;
  const now: CreditBalance[] = new Array<CreditBalance>(n);
  let refusedBy = -1;
  for (let j = 0; j < n; j++) {
    const b = balanceNow(stored[j], credits[j] as CompiledCredits, nowSec);
    now[j] = b;
    if (refusedBy < 0 && b.r < cost) refusedBy = j;
  }
  const states: CreditState[] = new Array<CreditState>(n);
  if (refusedBy >= 0) {
    for (let j = 0; j < n; j++) states[j] = creditState(now[j] as CreditBalance, credits[j] as CompiledCredits, nowSec);
    return { allowed: false, refusedBy, states };
  }
  let drained = 0;
  for (let j = 0; j < n; j++) {
    const b = now[j] as CreditBalance;
    if (b.r > 0 && b.r === cost) drained |= 1 << j;
    now[j] = { ...b, r: b.r - cost };
    states[j] = creditState(now[j] as CreditBalance, credits[j] as CompiledCredits, nowSec);
  }
  return { allowed: true, next: now, states, drained };
}

/**
 * A top-up: adds to the balance as it counts now (a refill that came due is applied first, then the
 * amount added to it). Undefined when the sum would pass MAX_CREDITS (nothing changes).
 */
export function topUp(
  stored: CreditBalance | undefined,
  c: CompiledCredits,
  nowSec: number,
  add: number,
): CreditBalance | undefined {
  const b = balanceNow(stored, c, nowSec);
  return b.r + add > MAX_CREDITS ? undefined : { ...b, r: b.r + add };
}
