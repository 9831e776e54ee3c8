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
 * A stored TAT as it counts now, under `limit`. `storedIntervalUs` is the interval of the limit it was written under
 * (the stores keep it beside the TAT; undefined: this limit's).
 *
 * When the limit changed since, what is kept is the **units spent**, not the time they take to come back: a budget
 * that had spent u units (TAT − now = u × T_old) has spent u units under the new limit too (TAT − now = u × T_new,
 * rounded up to a whole µs), never more than the new burst. So a raise (a faster rate, a larger burst) never leaves
 * less room than before, and a cut keeps what was spent, at most the whole new burst, which then comes back at the
 * new rate. Without the interval the debt was carried as time: one unit spent at 10/m (6 s) became 60 units at
 * 600/m. The stores write a converted or clamped TAT back with the new interval (on a refusal too), so it then
 * drains at the new rate. The Redis script does the same arithmetic in the same order (one division, one
 * multiplication, one ceiling on doubles), so both stores agree to the µs.
 */
export function tatNow(storedTatUs: number, nowUs: number, limit: CompiledLimit, storedIntervalUs?: number): number {
  if (storedTatUs <= nowUs) return nowUs;
  let tat = storedTatUs;
  if (storedIntervalUs !== undefined && storedIntervalUs > 0 && storedIntervalUs !== limit.intervalUs)
    tat = nowUs + Math.ceil(((storedTatUs - nowUs) / storedIntervalUs) * limit.intervalUs);
  const most = nowUs + limit.burst * limit.intervalUs;
  return tat > most ? most : tat;
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
      /** Budget i's TAT to store back (with its limit's interval) when it was converted or clamped (tatNow), else undefined: nothing is spent. */
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
  storedIntervalsUs?: readonly (number | undefined)[],
): ChargeStep {
  const n = limits.length;
  const tats: number[] = new Array<number>(n);
  let refusedBy = -1;
  for (let i = 0; i < n; i++) {
    const limit = limits[i] as CompiledLimit;
    const tat = tatNow(storedTatsUs[i] ?? 0, nowUs, limit, storedIntervalsUs?.[i]);
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
      const storedInterval = storedIntervalsUs?.[i];
      const tat = tatNow(stored, nowUs, limit, storedInterval);
      const converted = storedInterval !== undefined && storedInterval !== limit.intervalUs;
      clamped[i] = stored > nowUs && (stored !== tat || converted) ? tat : undefined;
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
export function peekBudget(
  storedTatUs: number,
  nowUs: number,
  limit: CompiledLimit,
  storedIntervalUs?: number,
): RateState {
  return chargeBudgets([storedTatUs], nowUs, [limit], 0, [storedIntervalUs]).states[0] as RateState;
}

/**
 * A budget as the Redis stores keep it: "<TAT µs>:<interval µs of the limit it was written under>" (budgets.ts
 * tatNow). A plain number (no interval) counts as written under the limit in force.
 */
export function parseStoredBudget(raw: string | null | undefined): { tatUs: number; intervalUs: number | undefined } {
  if (raw === null || raw === undefined || raw === '') return { tatUs: 0, intervalUs: undefined };
  const colon = raw.indexOf(':');
  if (colon < 0) return { tatUs: Number(raw) || 0, intervalUs: undefined };
  return { tatUs: Number(raw.slice(0, colon)) || 0, intervalUs: Number(raw.slice(colon + 1)) || undefined };
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
