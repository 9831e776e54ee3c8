// Tested in test/e2e/webhook-deliveries.test.ts.
import { noSuchEvent, parseDeliveryQuery } from '../operations/webhook-operations.js';
import { invalid, type Handler } from './management-answer.js';
import { onlyParams } from './request-fields.js';

/**
 * /v1/webhooks/deliveries: the events not yet delivered and retry-now, through the same webhook operations as
 * `keygate webhooks` (src/operations/webhook-operations.ts). With the embedded store there are no webhooks:
 * 501 webhooks_need_redis, never an empty list that would read as "all delivered".
 */

/** GET /v1/webhooks/deliveries?cursor=&limit= (a read token may list). */
const list: Handler = async ({ query }, deps) => {
  if (!deps.webhooks) return { error: 'webhooks_need_redis' };
  const problems: string[] = [];
  onlyParams(query, ['cursor', 'limit'], problems);
  const parsed = parseDeliveryQuery({
    cursor: query.get('cursor') ?? undefined,
    limit: query.get('limit') ?? undefined,
  });
  if (parsed.problems) problems.push(...parsed.problems.map((p) => `query.${p}`));
  if (problems.length > 0 || !parsed.query) return invalid(problems);
  return { status: 200, body: await deps.webhooks.list(parsed.query) };
};

/** POST /v1/webhooks/deliveries/{id}/retry (a write token): 202 due now, 404 none waiting, 409 being attempted. */
const retry: Handler = async ({ event }, deps) => {
  if (!deps.webhooks) return { error: 'webhooks_need_redis' };
  const r = await deps.webhooks.retry(event as string);
  if (r.ok) return { status: 202, body: r.value };
  if (r.refused === 'conflict') return { error: 'conflict', message: r.message };
  return { error: 'not_found', message: noSuchEvent(String(event)) };
};

export const webhookHandlers = { list, retry } as const;
