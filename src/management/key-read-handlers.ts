// Tested in test/unit/management-routes.test.ts, test/e2e/management-api.test.ts.
import { OWNER, OWNER_RULE, type KeyStatus } from '../keys/key-record.js';
import { parseUsageDays, usageReport, USAGE_DAYS_RULE } from '../keys/key-usage.js';
import { GRANULARITY_RULE, parseGranularity } from '../keys/outcome-usage.js';
import { invalid, keyView, refusal, type Handler } from './management-answer.js';
import { onlyParams } from './request-fields.js';
import { CURSOR, MAX_PAGE } from '../operations/key-listing.js';

const STATES: readonly KeyStatus[] = ['active', 'revoked', 'expired'];

/** GET /v1/keys: a page of keys, filtered by owner and state, in apiKey order. */
const list: Handler = async ({ query }, deps) => {
  const problems: string[] = [];
  onlyParams(query, ['owner', 'state', 'limit', 'cursor'], problems);
  const owner = query.get('owner') ?? undefined;
  if (owner !== undefined && !OWNER.test(owner)) problems.push(`query.owner: ${OWNER_RULE}`);
  const state = query.get('state') ?? undefined;
  if (state !== undefined && !STATES.includes(state as KeyStatus))
    problems.push('query.state: one of active, revoked, expired');
  const rawLimit = query.get('limit') ?? '100';
  const limit = /^\d{1,4}$/.test(rawLimit) ? Number(rawLimit) : 0;
  if (limit < 1 || limit > MAX_PAGE) problems.push(`query.limit: a whole number from 1 to ${MAX_PAGE}`);
  const rawCursor = query.get('cursor') ?? undefined;
  if (rawCursor !== undefined && !CURSOR.test(rawCursor)) problems.push('query.cursor: not a cursor this API returned');
  if (problems.length > 0) return invalid(problems);
  // Only this page is read from the store (its indexes), however many keys there are.
  const page = await deps.ops.list(
    { ...(owner !== undefined && { owner }), ...(state !== undefined && { state: state as KeyStatus }) },
    { limit, ...(rawCursor !== undefined && { cursor: rawCursor }) },
  );
  const keys = await Promise.all(page.records.map((r) => keyView(r, deps)));
  return { status: 200, body: { keys, nextCursor: page.nextCursor } };
};

/** GET /v1/keys/{apiKey}. */
const show: Handler = async ({ apiKey, query }, deps) => {
  const problems: string[] = [];
  onlyParams(query, [], problems);
  if (problems.length > 0) return invalid(problems);
  const r = await deps.ops.get(apiKey as string);
  return r.ok ? { status: 200, body: await keyView(r.value, deps) } : refusal(r);
};

/**
 * GET /v1/keys/{apiKey}/usage: the same report as `keygate keys usage`: admitted requests per day, or with
 * `granularity` the counts by outcome per minute, hour or day (keys/outcome-usage.ts).
 */
const usage: Handler = async ({ apiKey, query }, deps) => {
  const problems: string[] = [];
  onlyParams(query, ['days', 'granularity'], problems);
  const rawGranularity = query.get('granularity') ?? undefined;
  if (rawGranularity !== undefined) {
    const granularity = parseGranularity(rawGranularity);
    if (granularity === undefined) problems.push(`query.granularity: ${GRANULARITY_RULE}`);
    if (query.has('days')) problems.push('query.days: not with query.granularity (a report is one or the other)');
    if (problems.length > 0 || granularity === undefined) return invalid(problems);
    const r = await deps.ops.outcomeUsage(apiKey as string, granularity);
    return r.ok ? { status: 200, body: r.value } : refusal(r);
  }
  const days = parseUsageDays(query.get('days') ?? undefined);
  if (days === undefined) problems.push(`query.days: ${USAGE_DAYS_RULE}`);
  if (problems.length > 0 || days === undefined) return invalid(problems);
  const r = await deps.ops.usage(apiKey as string);
  if (!r.ok) return refusal(r);
  return { status: 200, body: usageReport(r.value.record, r.value.usage, days, deps.now()) };
};

/** The handlers that only read: any token may call them, with either store. */
export const keyReadHandlers = { list, show, usage } as const;
