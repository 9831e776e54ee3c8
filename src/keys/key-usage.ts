/**
 * Usage per key: when it was last admitted and how many requests it had per
 * UTC day. Written by the store in the same step as the nonce (one Redis round
 * trip); never a metric label (keys are unbounded).
 */
export interface KeyUsage {
  /** Epoch ms of the last admitted request; undefined when never used (or not since usage was recorded). */
  readonly lastUsedAtMs: number | undefined;
  /** "YYYY-MM-DD" (UTC) → admitted requests that day; days with none are absent. */
  readonly perDay: Readonly<Record<string, number>>;
  /**
   * "YYYY-MM-DD" → the cost spent beyond one per request that day (a route's `cost`); days
   * when every request cost 1 are absent. Spent cost = requests + this. Kept as the excess so a
   * request of cost 1, the common case, counts exactly as before (one counter).
   */
  readonly extraCostPerDay?: Readonly<Record<string, number>>;
}

/** The usage hash's field of a day's cost beyond one per request (Redis; the memory store keeps the same). */
export const extraCostField = (day: string) => `x:${day}`;

/** Per-day counts older than this many days (today included) are dropped. */
export const USAGE_DAYS = 35;

const DAY_MS = 86_400_000;

/** The UTC calendar day of an instant, "YYYY-MM-DD". */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/**
 * utcDay for a clock that moves forward: the day's name is built when the instant leaves the day the
 * last one fell in (a day index, `ms / DAY_MS`), not per call. Counting usage per request with a
 * `Date` and `toISOString` each time showed in the profile (about 2 to 4 µs a request).
 */
export function createUtcDayOf(): (ms: number) => string {
  let dayStart = 0;
  let dayEnd = 0;
  let day = '';
  return (ms) => {
    if (ms < dayStart || ms >= dayEnd) {
      dayStart = ms - (((ms % DAY_MS) + DAY_MS) % DAY_MS);
      dayEnd = dayStart + DAY_MS;
      day = utcDay(ms);
    }
    return day;
  };
}

/** The oldest day still kept when today is the day of `nowMs`. */
export function oldestKeptDay(nowMs: number): string {
  return utcDay(nowMs - (USAGE_DAYS - 1) * DAY_MS);
}

/** The last `days` UTC days ending today, oldest first, each with its count (0 when absent). */
export function dailyRows(
  usage: KeyUsage,
  days: number,
  nowMs: number,
): Array<{ day: string; requests: number; cost: number }> {
  const out: Array<{ day: string; requests: number; cost: number }> = [];
  for (let i = days - 1; i >= 0; i--) {
    const day = utcDay(nowMs - i * DAY_MS);
    const requests = usage.perDay[day] ?? 0;
    out.push({ day, requests, cost: requests + (usage.extraCostPerDay?.[day] ?? 0) });
  }
  return out;
}

/** When the key was last admitted, as shown to operators: ISO 8601, or null when never. */
export function lastUsedAt(usage: KeyUsage): string | null {
  return usage.lastUsedAtMs === undefined ? null : new Date(usage.lastUsedAtMs).toISOString();
}

/** What a `days` value must be; each caller puts its own name in front (--days, query.days). */
export const USAGE_DAYS_RULE = `a whole number from 1 to ${USAGE_DAYS} (per-day counts are kept ${USAGE_DAYS} days)`;

/** The days a usage report covers, as given (30 when not given); undefined when not USAGE_DAYS_RULE. */
export function parseUsageDays(raw: string | undefined): number | undefined {
  const days = raw === undefined ? 30 : /^\d{1,2}$/.test(raw) ? Number(raw) : 0;
  return days >= 1 && days <= USAGE_DAYS ? days : undefined;
}

/** One key's usage report: what `keygate keys usage --json` prints and GET /v1/keys/{apiKey}/usage returns. */
export function usageReport(key: { apiKey: string; id: string }, usage: KeyUsage, days: number, nowMs: number) {
  const perDay = dailyRows(usage, days, nowMs);
  return {
    apiKey: key.apiKey,
    id: key.id,
    lastUsedAt: lastUsedAt(usage),
    days,
    total: perDay.reduce((sum, d) => sum + d.requests, 0),
    /** The cost spent (each request its route's cost), the sum over the days shown. */
    cost: perDay.reduce((sum, d) => sum + d.cost, 0),
    perDay,
  };
}
