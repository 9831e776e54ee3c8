import type { CompiledCredits } from '../keys/credits.js';
import type { CompiledLimit } from '../policy/rate-limit-spec.js';
import type { RateState } from './rate-limit.js';

/**
 * Several budgets charged at once: a request costs its route's `cost` (1..1000) and
 * passes only if EVERY budget that applies to it (the key's, its owner's) has room for that cost.
 * Then the cost is spent from all of them; otherwise from none (all or nothing), so a refused
 * request leaves every budget as it was and its nonce unburnt.
 *
 * Each budget is GCRA (rate-limit.ts) with a weight: spending `cost` moves the TAT by
 * `cost * T`; a budget has room when the moved TAT is at most `burst * T` ahead of now. Budgets
 * count in cost units: a burst of 50 holds ten requests of cost 5. A cost above a budget's burst
 * never fits (the request is always refused for that key; `Retry-After` then says when the budget
 * is full, the best a client can be told).
 *
 * The Redis admit script (admit-script.ts) does this arithmetic line for line on integer
 * microseconds; the store contract suite checks both stores against the same cases, and
 * test/unit/budgets.test.ts checks this function against a reference model.
 */

/**
 * A stored TAT as it counts now: never before now (a budget at rest), and never more than the whole
 * burst ahead (`burst * T`). Under an unchanged limit a stored TAT is never further ahead than that;
 * after the limit was raised (a faster rate, a larger burst) the old rate's debt would otherwise carry
 * over for as long as it took to pay at the old rate, so it is clamped: the new limit applies at once,
 * as if its budget had just been spent whole. The stores write a clamped TAT back (on a refusal too), so
 * it then drains at the new rate.
 */
export function tatNow(storedTatUs: number, nowUs: number, limit: CompiledLimit): number {
  if (storedTatUs <= nowUs) return nowUs;
  const most = nowUs + limit.burst * limit.intervalUs;
  return storedTatUs > most ? most : storedTatUs;
}

/** Which budget a state belongs to: the key's own (or the policy default), or its owner's. */
export type BudgetKind = 'key' | 'owner';

export interface Budget {
  readonly kind: BudgetKind;
  readonly limit: CompiledLimit;
}

/** Credits a request spends from (keys/credits.ts, store/credits.ts): the key's, or its owner's. */
export interface CreditCharge {
  readonly kind: BudgetKind;
  readonly spec: CompiledCredits;
}

/**
 * What one admit charges: the route's cost, where the key's state lives (its owner, if any), the
 * budgets that apply, the key's first, and the credits (absent: none, no work for them). No budgets and
 * no credits: only the replay guard runs (no script in Redis).
 */
export interface Charge {
  readonly cost: number;
  readonly owner: string | undefined;
  readonly budgets: readonly Budget[];
  readonly credits?: readonly CreditCharge[] | undefined;
}

export type ChargeStep =
  | { readonly allowed: true; readonly tatsUs: readonly number[]; readonly states: readonly RateState[] }
  | {
      readonly allowed: false;
      readonly refusedBy: number;
      readonly states: readonly RateState[];
      /** Budget i's TAT to store back when it was clamped to its burst (tatNow), else undefined: nothing is spent. */
      readonly clampedUs: readonly (number | undefined)[];
    };

/**
 * One decision over several budgets. `storedTatsUs[i]` is budget i's stored TAT (0 or a past time
 * for a budget at rest). Allowed: the caller stores `tatsUs` (each may expire when it passes).
 * Refused: `refusedBy` is the first budget without room; `states` tell, per budget, what is left
 * now (nothing was spent) and when the cost fits (`retryAfterUs`, 0 for a budget with room).
 */
export function chargeBudgets(
  storedTatsUs: readonly number[],
  nowUs: number,
  limits: readonly CompiledLimit[],
  cost: number,
): ChargeStep {
  const n = limits.length;
  const tats: number[] = new Array<number>(n);
  let refusedBy = -1;
  for (let i = 0; i < n; i++) {
    const limit = limits[i] as CompiledLimit;
    const tat = tatNow(storedTatsUs[i] ?? 0, nowUs, limit);
    const next = tat + cost * limit.intervalUs;
    tats[i] = next;
    if (refusedBy < 0 && next - nowUs > limit.burst * limit.intervalUs) refusedBy = i;
  }
  const states: RateState[] = new Array<RateState>(n);
  const clamped: (number | undefined)[] = [];
  for (let i = 0; i < n; i++) {
    const limit = limits[i] as CompiledLimit;
    const capacity = limit.burst * limit.intervalUs;
    const next = tats[i] as number;
    if (refusedBy < 0) {
      states[i] = {
        remaining: Math.floor((capacity - (next - nowUs)) / limit.intervalUs),
        resetUs: next - nowUs,
        retryAfterUs: 0,
      };
    } else {
      const stored = storedTatsUs[i] ?? 0;
      const tat = tatNow(stored, nowUs, limit);
      clamped[i] = stored > tat ? tat : undefined;
      states[i] = {
        remaining: Math.max(0, Math.floor((capacity - (tat - nowUs)) / limit.intervalUs)),
        resetUs: tat - nowUs,
        retryAfterUs: Math.max(0, next - nowUs - capacity),
      };
    }
  }
  return refusedBy < 0
    ? { allowed: true, tatsUs: tats, states }
    : { allowed: false, refusedBy, states, clampedUs: clamped };
}

/** Where a budget stands now, spending nothing: what is left and when it is whole again (the console's read). */
export function peekBudget(storedTatUs: number, nowUs: number, limit: CompiledLimit): RateState {
  return chargeBudgets([storedTatUs], nowUs, [limit], 0).states[0] as RateState;
}

/** When a refused charge may be retried: once every budget has room for it, in µs. */
export function retryAfterUs(states: readonly RateState[]): number {
  let most = 0;
  for (const s of states) if (s.retryAfterUs > most) most = s.retryAfterUs;
  return most;
}

/**
 * The failed-authentication budget per client IP: one failure spends 1 when the budget
 * has room (`spent`; `tatUs` is the TAT to store, undefined: nothing to store). `blockedUs` is how long
 * from now the budget has no room for one more, in µs (0: not empty): while it lasts, the IP is
 * refused before any check, so no further failure can be spent. The Redis script
 * (ip-budget-script.ts) does the same arithmetic.
 */
export function spendFailure(
  storedTatUs: number,
  nowUs: number,
  limit: CompiledLimit,
): { readonly spent: boolean; readonly tatUs: number | undefined; readonly blockedUs: number } {
  const capacity = limit.burst * limit.intervalUs;
  let tat = tatNow(storedTatUs, nowUs, limit);
  // A TAT clamped to the burst is stored back even when nothing more is spent (tatNow).
  let stored: number | undefined = storedTatUs > tat ? tat : undefined;
  const spent = tat + limit.intervalUs - nowUs <= capacity;
  if (spent) stored = tat = tat + limit.intervalUs;
  const blocked = tat + limit.intervalUs - nowUs - capacity;
  return { spent, tatUs: stored, blockedUs: blocked > 0 ? blocked : 0 };
}
