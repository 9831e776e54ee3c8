// Tested in test/e2e/owner-limits.test.ts (PUT /v1/owners/{owner}), test/e2e/console-browser.test.ts.
import { invalid, refusal, type Handler } from './management-answer.js';
import { fields, onlyParams } from './request-fields.js';

/**
 * /v1/owners/{owner}: an owner's own rate limit, through the same owner operations as
 * `keygate owners` (src/operations/owner-operations.ts). An owner without a limit of its own is
 * answered 200 with `rateLimit: null` (any name may own keys; the policy's default applies).
 */

/** GET /v1/owners/{owner}. */
const show: Handler = async ({ owner, query }, deps) => {
  const problems: string[] = [];
  onlyParams(query, [], problems);
  if (problems.length > 0 || !deps.owners) return invalid(problems);
  const r = await deps.owners.get(owner as string);
  return r.ok ? { status: 200, body: r.value } : refusal(r);
};

/** PUT /v1/owners/{owner}: `{ "rateLimit": { "rate": "12/h", "burst": 12 } }`; null removes it. */
const put: Handler = async ({ owner, query, body, actor }, deps) => {
  const problems: string[] = [];
  onlyParams(query, [], problems);
  const o = fields(body, ['rateLimit', 'home'], problems);
  if (problems.length === 0 && o.rateLimit === undefined && o.home === undefined)
    problems.push('body.rateLimit: required, like {"rate": "12/h", "burst": 12}, or null to remove it');
  if (o.home !== undefined && typeof o.home !== 'string')
    problems.push('body.home: must be a region name listed under regions:');
  if (problems.length > 0 || !deps.owners) return invalid(problems);
  // Regions: the home first (its keys' admits move there), then the limit if one was given too.
  if (typeof o.home === 'string') {
    const moved = await deps.owners.setHome(owner as string, o.home, actor);
    if (!moved.ok) return refusal(moved);
    if (o.rateLimit === undefined) return { status: 200, body: { ...moved.value, warnings: [] } };
  }
  const r = await deps.owners.setRateLimit(owner as string, o.rateLimit ?? null, actor);
  return r.ok ? { status: 200, body: r.value } : refusal(r);
};

export const ownerHandlers = { show, put } as const;
