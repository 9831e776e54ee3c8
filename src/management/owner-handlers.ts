// Tested in test/e2e/owner-limits.test.ts (PUT /v1/owners/{owner}), test/e2e/usage-outcomes.test.ts (usage), test/e2e/console-browser.test.ts.
import { invalid, refusal, type Handler } from './management-answer.js';
import { fields, onlyParams } from './request-fields.js';
import { GRANULARITY_RULE, parseGranularity } from '../keys/outcome-usage.js';

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

/**
 * PUT /v1/owners/{owner}: `{ "rateLimit": { "rate": "12/h", "burst": 12 }, "credits": { "remaining": 1000 } }`;
 * null removes one, a field left out is kept as it is (at least one is given).
 */
const put: Handler = async ({ owner, query, body, actor }, deps) => {
  const problems: string[] = [];
  onlyParams(query, [], problems);
  const o = fields(body, ['rateLimit', 'credits', 'home'], problems);
  if (problems.length === 0 && o.rateLimit === undefined && o.credits === undefined && o.home === undefined)
    problems.push(
      'body.rateLimit: required, like {"rate": "12/h", "burst": 12}, or null to remove it (or give credits or home)',
    );
  if (o.home !== undefined && typeof o.home !== 'string')
    problems.push('body.home: must be a region name listed under regions:');
  if (problems.length > 0 || !deps.owners) return invalid(problems);
  // Regions: the home first (its keys' admits move there, their credits carried), then the limit and credits if given too.
  let moveWarnings: readonly string[] = [];
  if (typeof o.home === 'string') {
    const moved = await deps.owners.setHome(owner as string, o.home, actor);
    if (!moved.ok) return refusal(moved);
    if (o.rateLimit === undefined && o.credits === undefined) return { status: 200, body: moved.value };
    moveWarnings = moved.value.warnings;
  }
  const r = await deps.owners.set(
    owner as string,
    {
      ...(o.rateLimit !== undefined && { rateLimit: o.rateLimit }),
      ...(o.credits !== undefined && { credits: o.credits }),
    },
    actor,
  );
  return r.ok ? { status: 200, body: { ...r.value, warnings: [...moveWarnings, ...r.value.warnings] } } : refusal(r);
};

/** GET /v1/owners/{owner}/usage?granularity=: the sum of its keys' usage by outcome, as `keygate owners usage`. */
const usage: Handler = async ({ owner, query }, deps) => {
  const problems: string[] = [];
  onlyParams(query, ['granularity'], problems);
  const granularity = parseGranularity(query.get('granularity') ?? 'hour');
  if (granularity === undefined) problems.push(`query.granularity: ${GRANULARITY_RULE}`);
  if (problems.length > 0 || !deps.owners || granularity === undefined) return invalid(problems);
  const r = await deps.owners.outcomeUsage(owner as string, granularity);
  return r.ok ? { status: 200, body: r.value } : refusal(r);
};

/** POST /v1/owners/{owner}/credits: `{"add": n}`, one atomic top-up of the owner's credits. */
const addCredits: Handler = async ({ owner, body, actor }, deps) => {
  const problems: string[] = [];
  const o = fields(body, ['add'], problems);
  if (problems.length > 0 || !deps.owners) return invalid(problems);
  const r = await deps.owners.addCredits(owner as string, o.add, actor);
  return r.ok ? { status: 200, body: r.value } : refusal(r);
};

export const ownerHandlers = { show, put, usage, addCredits } as const;
