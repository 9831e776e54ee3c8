// Tested in test/e2e/rate-limit.test.ts.
import type { RateInfo } from '../pipeline/authenticate.js';
import { POLICY_NAME } from '../policy/rate-limit-spec.js';

/**
 * The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers):
 *   RateLimit-Policy: "keygate";q=<burst>;w=<seconds for a whole burst to come back>
 *   RateLimit:        "keygate";r=<requests that could pass now>;t=<seconds until all of them can>
 * Both are structured-field lists, so an upstream's own policies in the same
 * fields stay valid beside Keygate's (the field lines are combined).
 */
const seconds = (us: number) => Math.ceil(us / 1_000_000);

function rateLimitValue(rate: RateInfo): string {
  return `"${POLICY_NAME}";r=${rate.state.remaining};t=${seconds(rate.state.resetUs)}`;
}

/** For a 429: Retry-After (seconds, rounded up: never earlier than the next request can pass) and both RateLimit fields. */
export function limitedHeaders(rate: RateInfo): Record<string, string> {
  return {
    'retry-after': String(Math.max(1, seconds(rate.state.retryAfterUs))),
    'ratelimit-policy': rate.limit.policyHeader,
    ratelimit: rateLimitValue(rate),
  };
}

/** For a forwarded response, as a flat [name, value, …] list appended to the upstream's head. */
export function allowedHeaders(rate: RateInfo): string[] {
  return ['ratelimit-policy', rate.limit.policyHeader, 'ratelimit', rateLimitValue(rate)];
}
