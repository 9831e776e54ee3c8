import { describe, expect, it } from 'vitest';
import { createWebhookOperations, deliveryView, parseDeliveryQuery } from '../../src/operations/webhook-operations.js';
import { AUDIT_STREAM_FIELD, auditEntry } from '../../src/store/audit-entry.js';
import type { QueuedWebhook, RetryNow, WebhookQueue } from '../../src/store/webhook-queue.js';

const AT = Date.parse('2026-03-01T12:00:00Z');
const fieldsOf = (action: Parameters<typeof auditEntry>[2]) => [
  AUDIT_STREAM_FIELD,
  JSON.stringify(auditEntry(AT, 'ops', action, { apiKey: 'kg_abc', id: 'key_1' })),
];
const queued = (over: Partial<QueuedWebhook> = {}): QueuedWebhook => ({
  id: `${AT}-0`,
  fields: fieldsOf('revoke'),
  attempts: 0,
  lastError: '',
  nextAttemptMs: undefined,
  holder: undefined,
  ...over,
});

describe('deliveryView: a stored event as the list shows it', () => {
  it('a waiting retry: its attempts, last error and next attempt; no instance', () => {
    expect(deliveryView(queued({ attempts: 2, lastError: '503', nextAttemptMs: AT + 30_000 }))).toEqual({
      id: `msg_${AT}-0`,
      type: 'key.revoked',
      createdAt: '2026-03-01T12:00:00.000Z',
      state: 'waiting',
      attempts: 2,
      nextAttemptAt: '2026-03-01T12:00:30.000Z',
      lastError: '503',
      instance: null,
    });
  });

  it('an attempt in flight: the instance making it, no next attempt', () => {
    expect(deliveryView(queued({ holder: 'host:42:abcd1234' }))).toMatchObject({
      state: 'attempting',
      instance: 'host:42:abcd1234',
      nextAttemptAt: null,
      lastError: null,
    });
  });

  it('an entry trimmed from the stream: no type, created when its id says', () => {
    expect(deliveryView(queued({ id: `${AT + 5}-3`, fields: [] }))).toMatchObject({
      id: `msg_${AT + 5}-3`,
      type: null,
      createdAt: '2026-03-01T12:00:00.005Z',
    });
  });

  it('leaves out an entry that is no event (a replayed create is settled unsent)', () => {
    expect(deliveryView(queued({ fields: fieldsOf('create-replay') }))).toBeUndefined();
  });
});

describe('parseDeliveryQuery', () => {
  it('defaults to 100 and takes a cursor as a page gave it', () => {
    expect(parseDeliveryQuery({})).toEqual({ query: { limit: 100 } });
    expect(parseDeliveryQuery({ limit: '1000', cursor: `${AT}-7` })).toEqual({
      query: { limit: 1000, cursor: `${AT}-7` },
    });
  });
  it.each([['0'], ['1001'], ['ten'], ['-1']])('refuses limit %s', (limit) => {
    expect(parseDeliveryQuery({ limit }).problems).toEqual(['limit: an integer from 1 to 1000']);
  });
  it('refuses a cursor that no page gives', () => {
    expect(parseDeliveryQuery({ cursor: `msg_${AT}-0` }).problems).toEqual([
      "cursor: a page's nextCursor, as it was given",
    ]);
  });
});

/** A queue whose answers the test sets, recording what it was asked. */
function fakeQueue(page: { events: QueuedWebhook[]; more: boolean }, retry: RetryNow) {
  const asked: unknown[] = [];
  const queue: WebhookQueue = {
    list: async (p) => (asked.push(['list', p]), page),
    retryNow: async (id, nowMs) => (asked.push(['retry', id, nowMs]), retry),
  };
  return { queue, asked };
}

describe('createWebhookOperations', () => {
  it('is undefined for a store without webhook state (the embedded store)', () => {
    expect(createWebhookOperations({ store: {}, now: () => AT })).toBeUndefined();
  });

  it('lists a page; the cursor is the last stored id, also when that entry is not shown', async () => {
    const events = [queued(), queued({ id: `${AT}-1`, fields: fieldsOf('create-replay') })];
    const { queue, asked } = fakeQueue({ events, more: true }, { outcome: 'scheduled' });
    const ops = createWebhookOperations({ store: { webhooks: queue }, now: () => AT })!;
    const page = await ops.list({ limit: 2, cursor: `${AT - 1}-0` });
    expect(page.deliveries.map((d) => d.id)).toEqual([`msg_${AT}-0`]);
    expect(page.nextCursor).toBe(`${AT}-1`);
    expect(asked).toEqual([['list', { after: `${AT - 1}-0`, limit: 2, nowMs: AT }]]);
    const end = fakeQueue({ events, more: false }, { outcome: 'scheduled' });
    const last = createWebhookOperations({ store: { webhooks: end.queue }, now: () => AT })!;
    expect((await last.list({ limit: 2 })).nextCursor).toBeNull();
  });

  it('retry: due now; not found for an unknown or malformed id; a conflict naming the instance attempting it', async () => {
    const scheduled = fakeQueue({ events: [], more: false }, { outcome: 'scheduled' });
    const ops = createWebhookOperations({ store: { webhooks: scheduled.queue }, now: () => AT })!;
    expect(await ops.retry(`msg_${AT}-0`)).toEqual({
      ok: true,
      value: { id: `msg_${AT}-0`, nextAttemptAt: '2026-03-01T12:00:00.000Z' },
    });
    expect(await ops.retry(`${AT}-0`)).toMatchObject({ ok: false, refused: 'not_found' });
    // Only a well-formed id reaches Redis.
    expect(scheduled.asked).toEqual([['retry', `${AT}-0`, AT]]);

    const gone = fakeQueue({ events: [], more: false }, { outcome: 'not_found' });
    const onGone = createWebhookOperations({ store: { webhooks: gone.queue }, now: () => AT })!;
    expect(await onGone.retry(`msg_${AT}-0`)).toMatchObject({ ok: false, refused: 'not_found' });

    const busy = fakeQueue({ events: [], more: false }, { outcome: 'attempting', holder: 'host:42:abcd1234' });
    const onBusy = createWebhookOperations({ store: { webhooks: busy.queue }, now: () => AT })!;
    const r = await onBusy.retry(`msg_${AT}-0`);
    expect(r).toMatchObject({ ok: false, refused: 'conflict' });
    expect(r.ok === false && r.refused === 'conflict' && r.message).toContain('host:42:abcd1234');
  });
});
