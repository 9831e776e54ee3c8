// Tested in test/e2e/rate-limit.test.ts.
import type { RateInfo } from '../pipeline/authenticate.js';
import { retryAfterUs } from '../store/budgets.js';

/**
 * The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers), one list item per budget that
 * applied: "keygate" (the key's), "keygate-owner" (its owner's), "keygate-ip" (the client
 * IP's failed-authentication budget, on ip_blocked), all in cost units:
 *   RateLimit-Policy: "keygate";q=<burst>;w=<seconds for a whole burst to come back>, …
 *   RateLimit:        "keygate";r=<units that could be spent now>;t=<seconds until all of them can>, …
 * Both are structured-field lists, so an upstream's own policies in the same
 * fields stay valid beside Keygate's (the field lines are combined).
 * Credits (keys/credits.ts) are quota policies in the same lists, after the budgets: "keygate-credits" (the
 * key's), "keygate-owner-credits":
 *   RateLimit-Policy: "keygate-credits";q=<refill amount, or the balance as set>[;w=86400|2592000]
 *   RateLimit:        "keygate-credits";r=<left>[;t=<seconds until the refill>]   (no t: no refill)
 */
const seconds = (us: number) => Math.ceil(us / 1_000_000);

function policyValue(rate: RateInfo): string {
  let out =
    rate.limits.length === 1 ? (rate.limits[0]?.policyHeader ?? '') : rate.limits.map((l) => l.policyHeader).join(', ');
  if (rate.credits) for (const c of rate.credits) out += `${out === '' ? '' : ', '}${c.policyHeader}`;
  return out;
}

function rateLimitValue(rate: RateInfo): string {
  let out = '';
  rate.states.forEach((s, i) => {
    out += `${i > 0 ? ', ' : ''}"${rate.limits[i]?.name ?? ''}";r=${s.remaining};t=${seconds(s.resetUs)}`;
  });
  rate.creditStates?.forEach((s, j) => {
    const refill = s.refillInS >= 0 ? `;t=${s.refillInS}` : '';
    out += `${out === '' ? '' : ', '}"${rate.credits?.[j]?.name ?? ''}";r=${s.remaining}${refill}`;
  });
  return out;
}

/**
 * For a 429: Retry-After (seconds, rounded up: never earlier than every budget has room) and both RateLimit
 * fields. `never`: the cost can never fit (cost_exceeds_burst): the RateLimit fields only, since no wait would
 * help. Refused for credits: Retry-After is the seconds until they are refilled, and absent without a refill
 * (no retry can help until a top-up).
 */
export function limitedHeaders(rate: RateInfo, never = false): Record<string, string> {
  if (never) return { 'ratelimit-policy': policyValue(rate), ratelimit: rateLimitValue(rate) };
  if (rate.exhaustedBy !== undefined) {
    const refill = rate.creditStates?.[rate.exhaustedBy]?.refillInS ?? -1;
    return {
      ...(refill >= 0 && { 'retry-after': String(Math.max(1, refill)) }),
      'ratelimit-policy': policyValue(rate),
      ratelimit: rateLimitValue(rate),
    };
  }
  return {
    'retry-after': String(Math.max(1, seconds(retryAfterUs(rate.states)))),
    'ratelimit-policy': policyValue(rate),
    ratelimit: rateLimitValue(rate),
  };
}

/** For a forwarded response, as a flat [name, value, …] list appended to the upstream's head. */
export function allowedHeaders(rate: RateInfo): string[] {
  return ['ratelimit-policy', policyValue(rate), 'ratelimit', rateLimitValue(rate)];
}
