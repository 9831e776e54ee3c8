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
 */
const seconds = (us: number) => Math.ceil(us / 1_000_000);

function policyValue(rate: RateInfo): string {
  return rate.limits.length === 1
    ? (rate.limits[0]?.policyHeader ?? '')
    : rate.limits.map((l) => l.policyHeader).join(', ');
}

function rateLimitValue(rate: RateInfo): string {
  let out = '';
  rate.states.forEach((s, i) => {
    out += `${i > 0 ? ', ' : ''}"${rate.limits[i]?.name ?? ''}";r=${s.remaining};t=${seconds(s.resetUs)}`;
  });
  return out;
}

/**
 * For a 429: Retry-After (seconds, rounded up: never earlier than every budget has room) and both RateLimit fields.
 * `never`: the cost can never fit (cost_exceeds_burst): the RateLimit fields only, since no wait would help.
 */
export function limitedHeaders(rate: RateInfo, never = false): Record<string, string> {
  if (never) return { 'ratelimit-policy': policyValue(rate), ratelimit: rateLimitValue(rate) };
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
