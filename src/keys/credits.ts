/**
 * Credits: an allowance a key (and separately its owner) may hold, spent by the admit step with the
 * route's cost, all or nothing, beside the rate budgets. `remaining` is the balance as an operator set it;
 * `refill` sets the balance to `amount` (it does not add) at 00:00 UTC every day, or on the 1st of every
 * month. No credits: unlimited.
 *
 * The balance itself is not kept in the record: it lives with the admit step's state (store/credits.ts,
 * the Redis admit script), so a spend, a refill and a top-up are each one atomic step there. The record
 * says what the balance was set to and when (`setAt`): the admit step starts from it the first time it
 * sees that set, and a later set (a larger `setAt`) replaces the balance even while another instance
 * still holds the older record in its cache (an older `setAt` never undoes a newer one).
 */
export interface CreditsSpec {
  readonly remaining: number;
  readonly refill?: { readonly amount: number; readonly interval: CreditInterval };
  /** When the balance was set (ms since the epoch); absent in a keys file (then the file's value is the set). */
  readonly setAt?: number;
}

export type CreditInterval = 'day' | 'month';

/** The largest amount a balance, a refill or a top-up may hold: exact in a double and in Lua. */
export const MAX_CREDITS = Number.MAX_SAFE_INTEGER;

/** The interval's code in the admit step (and the Redis script's ARGV): 0 none, 1 day, 2 month. */
export type IntervalCode = 0 | 1 | 2;

/** What the admit step needs of a credits spec, prepared once per key (or owner) and shared by its requests. */
export interface CompiledCredits {
  /** The set's order: `setAt`, 0 for a keys file's (store/credits.ts). */
  readonly gen: number;
  /** The balance as set. */
  readonly remaining: number;
  /** The refill's amount (0: none). */
  readonly amount: number;
  readonly interval: IntervalCode;
  /** `"<name>";q=<quota>[;w=<seconds>]`: the quota policy in RateLimit-Policy. */
  readonly policyHeader: string;
  /** "keygate-credits" (the key's) or "keygate-owner-credits". */
  readonly name: string;
}

export const KEY_CREDITS_NAME = 'keygate-credits';
export const OWNER_CREDITS_NAME = 'keygate-owner-credits';

const isAmount = (v: unknown): v is number =>
  typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_CREDITS;
const AMOUNT_RULE = `must be a whole number from 0 to ${MAX_CREDITS}`;

/** Validates an untrusted `{ remaining, refill?: { amount, interval }, setAt? }` (keys file, Redis, CLI, API). */
export function parseCredits(v: unknown, where: string, errors: string[]): CreditsSpec | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) {
    errors.push(`${where}: must be an object like { remaining: 10000, refill: { amount: 10000, interval: "month" } }`);
    return undefined;
  }
  const before = errors.length;
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o))
    if (k !== 'remaining' && k !== 'refill' && k !== 'setAt')
      errors.push(`${where}: unknown field ${JSON.stringify(k)}`);
  if (!isAmount(o.remaining)) errors.push(`${where}.remaining: ${AMOUNT_RULE}`);
  let refill: CreditsSpec['refill'];
  if (o.refill !== undefined && o.refill !== null) {
    const r = o.refill as Record<string, unknown>;
    if (typeof r !== 'object' || Array.isArray(r)) errors.push(`${where}.refill: must be { amount, interval }`);
    else {
      for (const k of Object.keys(r))
        if (k !== 'amount' && k !== 'interval') errors.push(`${where}.refill: unknown field ${JSON.stringify(k)}`);
      if (!isAmount(r.amount)) errors.push(`${where}.refill.amount: ${AMOUNT_RULE}`);
      if (r.interval !== 'day' && r.interval !== 'month')
        errors.push(`${where}.refill.interval: must be "day" or "month"`);
      if (errors.length === before) refill = { amount: r.amount as number, interval: r.interval as CreditInterval };
    }
  }
  if (o.setAt !== undefined && !isAmount(o.setAt)) errors.push(`${where}.setAt: ${AMOUNT_RULE}`);
  if (errors.length > before) return undefined;
  return {
    remaining: o.remaining as number,
    ...(refill && { refill }),
    ...(typeof o.setAt === 'number' && { setAt: o.setAt }),
  };
}

/** `10000/month` or `500/day` (the CLI's --refill). */
export function parseRefill(raw: string, where: string, errors: string[]): CreditsSpec['refill'] {
  const m = /^(\d{1,16})\/(day|month)$/.exec(raw.trim());
  const amount = m ? Number(m[1]) : NaN;
  if (!m || !isAmount(amount)) {
    errors.push(`${where}: must be <amount>/day or <amount>/month, the amount a whole number from 0 to ${MAX_CREDITS}`);
    return undefined;
  }
  return { amount, interval: m[2] as CreditInterval };
}

/** A new set's order: after every earlier set of the same key, even when this clock is behind theirs. */
export function nextSetAt(previous: CreditsSpec | undefined, nowMs: number): number {
  return Math.max(nowMs, (previous?.setAt ?? 0) + 1);
}

export function compileCredits(spec: CreditsSpec, name: string): CompiledCredits {
  const interval: IntervalCode = spec.refill === undefined ? 0 : spec.refill.interval === 'day' ? 1 : 2;
  const amount = spec.refill?.amount ?? 0;
  const window = interval === 1 ? ';w=86400' : interval === 2 ? ';w=2592000' : '';
  return {
    gen: spec.setAt ?? 0,
    remaining: spec.remaining,
    amount,
    interval,
    policyHeader: `"${name}";q=${interval === 0 ? spec.remaining : amount}${window}`,
    name,
  };
}

/** Days since 1970-01-01 of a civil date (proleptic Gregorian); `month` 1..12. */
export function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const mp = (month + 9) % 12;
  const doy = Math.floor((153 * mp + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

/**
 * The refill period a time (seconds since the epoch) falls in: the day number, or year * 12 + month - 1.
 * 0 when there is no refill. The Redis admit script does the same arithmetic (admit-script.ts).
 */
export function periodOf(interval: IntervalCode, sec: number): number {
  if (interval === 0) return 0;
  const days = Math.floor(sec / 86400);
  if (interval === 1) return days;
  const z = days + 719468;
  const era = Math.floor(z / 146097);
  const doe = z - era * 146097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  return year * 12 + month - 1;
}

/** When the period after `period` starts (seconds since the epoch): the next refill. */
export function periodEndSec(interval: IntervalCode, period: number): number {
  if (interval === 1) return (period + 1) * 86400;
  const next = period + 1;
  return daysFromCivil(Math.floor(next / 12), (next % 12) + 1, 1) * 86400;
}

/** The credits as the CLI and the API show them: the spec and, from the store, what is left and the next refill. */
export interface CreditsView {
  readonly remaining: number;
  readonly refill: { readonly amount: number; readonly interval: CreditInterval } | null;
  /** ISO 8601; null without a refill. */
  readonly nextRefillAt: string | null;
}
