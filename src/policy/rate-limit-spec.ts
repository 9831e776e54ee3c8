/**
 * What an operator writes for a rate limit ({ rate: "100/s", burst: 200 }, in
 * the keys file, a Redis record, the policy's defaultRateLimit or a CLI flag),
 * checked and compiled once into the numbers GCRA runs on
 * (src/store/rate-limit.ts). Everything is in integer microseconds.
 */

export interface RateLimitSpec {
  /** "<count>/<s|m|h>", e.g. "100/s". */
  readonly rate: string;
  /** Requests that may pass at once; defaults to the count of `rate`. */
  readonly burst?: number;
}

export interface CompiledLimit {
  /** T: microseconds between requests at the sustained rate (rounded up: never faster than asked). */
  readonly intervalUs: number;
  readonly burst: number;
  /** The IETF RateLimit-Policy field value, built once. */
  readonly policyHeader: string;
  /** The policy's name in RateLimit-Policy / RateLimit: "keygate" (the key's), "keygate-owner", "keygate-ip". */
  readonly name: string;
  /** The limit as written ("100/s burst 200"), for `keygate check-config`: the rate an operator chose, not its rounding. */
  readonly shown: string;
}

/** The name Keygate gives its policy in RateLimit-Policy / RateLimit (a list: an upstream's own policies can sit beside it). */
export const POLICY_NAME = 'keygate';
/** The owner's budget and the failed-authentication budget per IP, beside the key's. */
export const OWNER_POLICY_NAME = 'keygate-owner';
export const IP_POLICY_NAME = 'keygate-ip';
export const MAX_RATE_COUNT = 1_000_000;
export const MAX_BURST = 1_000_000;
const PERIOD_US: Readonly<Record<string, number>> = { s: 1_000_000, m: 60_000_000, h: 3_600_000_000 };
const RATE = /^(\d{1,7})\/(s|m|h)$/;

/** Parses "100/s" into a count and a period, or says what is wrong. */
export function parseRate(raw: string): { count: number; periodUs: number } | string {
  const m = RATE.exec(raw.trim());
  const count = m ? Number(m[1]) : 0;
  if (!m || count < 1 || count > MAX_RATE_COUNT)
    return `expected <count>/s, /m or /h with a count from 1 to ${MAX_RATE_COUNT}, got ${JSON.stringify(raw)}`;
  return { count, periodUs: PERIOD_US[m[2] as string] as number };
}

/** Validates an untrusted `{ rate, burst? }` (keys file, Redis, policy file, CLI); pushes problems to `errors`. */
export function parseRateLimitSpec(v: unknown, where: string, errors: string[]): RateLimitSpec | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) {
    errors.push(`${where}: must be an object like { rate: "100/s", burst: 200 }`);
    return undefined;
  }
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o))
    if (k !== 'rate' && k !== 'burst') errors.push(`${where}: unknown field ${JSON.stringify(k)}`);
  if (typeof o.rate !== 'string') {
    errors.push(`${where}.rate: required, like "100/s"`);
    return undefined;
  }
  const rate = parseRate(o.rate);
  if (typeof rate === 'string') {
    errors.push(`${where}.rate: ${rate}`);
    return undefined;
  }
  if (o.burst === undefined || o.burst === null) return { rate: o.rate.trim() };
  if (typeof o.burst !== 'number' || !Number.isInteger(o.burst) || o.burst < 1 || o.burst > MAX_BURST) {
    errors.push(`${where}.burst: must be an integer from 1 to ${MAX_BURST}`);
    return undefined;
  }
  return { rate: o.rate.trim(), burst: o.burst };
}

/** Only for specs that passed parseRateLimitSpec. */
export function compileRateLimit(spec: RateLimitSpec, name: string = POLICY_NAME): CompiledLimit {
  const rate = parseRate(spec.rate);
  if (typeof rate === 'string') throw new Error(rate);
  const burst = spec.burst ?? rate.count;
  const intervalUs = Math.ceil(rate.periodUs / rate.count);
  return { intervalUs, burst, policyHeader: policyHeader(name, burst, rate), name, shown: describeRateLimit(spec) };
}

/**
 * RateLimit-Policy's value: q = the burst, w = the seconds the whole burst takes to come back at the rate as
 * written, burst × period ÷ count, rounded up to a whole second (so `n/s` with burst n is w=1, and `q/w` never
 * promises more than the rate). Worked from the written rate in integers, not from the interval: the interval is
 * rounded up to a whole µs (3/s is 333,334 µs), which must not turn 1 s into 2 (the burst comes back within
 * w seconds and at most `burst` µs of that rounding).
 */
function policyHeader(name: string, burst: number, rate: { count: number; periodUs: number }): string {
  const units = burst * (rate.periodUs / 1_000_000); // exact integers: at most 1e6 × 3600
  const rest = units % rate.count;
  const windowS = (units - rest) / rate.count + (rest === 0 ? 0 : 1);
  return `"${name}";q=${burst};w=${windowS}`;
}

/** "100/s", or "100/s burst 200" when the burst is not the default. */
export function describeRateLimit(spec: RateLimitSpec | undefined): string {
  if (!spec) return 'none';
  return spec.burst === undefined ? spec.rate : `${spec.rate} burst ${spec.burst}`;
}
