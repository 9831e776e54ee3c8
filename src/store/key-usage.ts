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
}

/** Per-day counts older than this many days (today included) are dropped. */
export const USAGE_DAYS = 35;

const DAY_MS = 86_400_000;

/** The UTC calendar day of an instant, "YYYY-MM-DD". */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** The oldest day still kept when today is the day of `nowMs`. */
export function oldestKeptDay(nowMs: number): string {
  return utcDay(nowMs - (USAGE_DAYS - 1) * DAY_MS);
}

/** The last `days` UTC days ending today, oldest first, each with its count (0 when absent). */
export function dailyRows(usage: KeyUsage, days: number, nowMs: number): Array<{ day: string; requests: number }> {
  const out: Array<{ day: string; requests: number }> = [];
  for (let i = days - 1; i >= 0; i--) {
    const day = utcDay(nowMs - i * DAY_MS);
    out.push({ day, requests: usage.perDay[day] ?? 0 });
  }
  return out;
}
