// Tested in test/unit/webhook-operations.test.ts, test/e2e/webhook-deliveries.test.ts.
import type { WebhookQueueStore } from '../store/store.js';
import { auditEntryOfFields, EVENT_OF_ACTION, type WebhookEventType } from '../store/webhook-events.js';
import type { QueuedWebhook } from '../store/webhook-queue.js';
import { conflict, done, notFound, type Done } from './outcome.js';

export const DELIVERIES_DEFAULT_LIMIT = 100;
export const DELIVERIES_MAX_LIMIT = 1000;
/** A page's nextCursor: the last event's stream id, `<ms>-<seq>`. */
const CURSOR = /^\d{1,20}-\d{1,20}$/;
/** An event's webhook-id, as the receiver got it: `msg_` and its audit stream id. */
const EVENT_ID = /^msg_(\d{1,20}-\d{1,20})$/;

/**
 * One event not yet delivered, as GET /v1/webhooks/deliveries and `keygate webhooks list` show it: what it is and
 * where its delivery stands, never its body, the receiver's URL or a credential.
 */
export interface DeliveryView {
  /** The event's webhook-id (`msg_<audit stream id>`). */
  readonly id: string;
  /** null when its audit entry was trimmed from the stream (it is given up at its next attempt). */
  readonly type: WebhookEventType | null;
  /** When the change was made: the event's `timestamp`. */
  readonly createdAt: string;
  /** `attempting`: an instance is making an attempt now; `waiting`: for its next attempt. */
  readonly state: 'attempting' | 'waiting';
  /** Failed attempts so far. */
  readonly attempts: number;
  /** When the next attempt is due; null while one is being made. */
  readonly nextAttemptAt: string | null;
  /** The last failed attempt's HTTP status or cause (`ECONNREFUSED`, `UND_ERR_HEADERS_TIMEOUT`, ...); null for none. */
  readonly lastError: string | null;
  /** The instance (consumer name: host, pid and a random part) attempting it now; null while it waits. */
  readonly instance: string | null;
}

export interface DeliveryPage {
  readonly deliveries: readonly DeliveryView[];
  /** Where the next page starts; null when none follows. */
  readonly nextCursor: string | null;
}

export interface DeliveryQuery {
  readonly limit: number;
  readonly cursor?: string;
}

/** Retry-now's answer when no event by that id waits for an attempt. */
export const noSuchEvent = (eventId: string) =>
  `no webhook event ${eventId} is waiting: unknown, delivered or given up already`;

/** The list's query as the API's query string and the CLI's options give it, checked: every problem at once. */
export function parseDeliveryQuery(raw: {
  cursor?: string | undefined;
  limit?: string | undefined;
}): { query: DeliveryQuery; problems?: undefined } | { query?: undefined; problems: string[] } {
  const problems: string[] = [];
  let limit = DELIVERIES_DEFAULT_LIMIT;
  if (raw.limit !== undefined) {
    limit = /^\d{1,5}$/.test(raw.limit) ? Number(raw.limit) : NaN;
    if (!(limit >= 1 && limit <= DELIVERIES_MAX_LIMIT))
      problems.push(`limit: an integer from 1 to ${DELIVERIES_MAX_LIMIT}`);
  }
  if (raw.cursor !== undefined && !CURSOR.test(raw.cursor))
    problems.push("cursor: a page's nextCursor, as it was given");
  if (problems.length > 0) return { problems };
  return { query: { limit, ...(raw.cursor !== undefined && { cursor: raw.cursor }) } };
}

/** The stored row as shown; undefined for an entry that is no event (a replayed create: settled unsent). */
export function deliveryView(q: QueuedWebhook): DeliveryView | undefined {
  const entry = q.fields.length > 0 ? auditEntryOfFields(q.fields) : undefined;
  const type = entry ? EVENT_OF_ACTION[entry.action] : undefined;
  if (q.fields.length > 0 && type === undefined) return undefined;
  return {
    id: `msg_${q.id}`,
    type: type ?? null,
    createdAt: entry?.at ?? new Date(Number(q.id.split('-')[0])).toISOString(),
    state: q.holder === undefined ? 'waiting' : 'attempting',
    attempts: q.attempts,
    nextAttemptAt: q.nextAttemptMs === undefined ? null : new Date(q.nextAttemptMs).toISOString(),
    lastError: q.lastError === '' ? null : q.lastError,
    instance: q.holder ?? null,
  };
}

/**
 * The delivery list and retry-now, shared by the management API (/v1/webhooks/deliveries) and `keygate webhooks`.
 * undefined with a store that keeps no webhook state (the embedded store: webhooks need Redis).
 */
export function createWebhookOperations(deps: { store: WebhookQueueStore; now: () => number }) {
  const queue = deps.store.webhooks;
  if (!queue) return undefined;
  return {
    /** Events attempted and not yet delivered, oldest first, a page at a time. */
    async list(query: DeliveryQuery): Promise<DeliveryPage> {
      const page = await queue.list({ after: query.cursor, limit: query.limit, nowMs: deps.now() });
      const last = page.events.at(-1);
      return {
        deliveries: page.events.flatMap((q) => deliveryView(q) ?? []),
        nextCursor: page.more && last ? last.id : null,
      };
    },
    /**
     * The event's next attempt made due now (any instance sends it within a second): not found when no such
     * event is waiting (unknown, delivered or given up), a conflict while an instance attempts it.
     */
    async retry(eventId: string): Promise<Done<{ id: string; nextAttemptAt: string }>> {
      const id = EVENT_ID.exec(eventId)?.[1];
      if (id === undefined) return notFound;
      const now = deps.now();
      const r = await queue.retryNow(id, now);
      if (r.outcome === 'not_found') return notFound;
      if (r.outcome === 'attempting')
        return conflict(`${eventId} is being attempted now by ${r.holder}; its outcome is in that instance's log`);
      return done({ id: eventId, nextAttemptAt: new Date(now).toISOString() });
    },
  };
}
export type WebhookOperations = NonNullable<ReturnType<typeof createWebhookOperations>>;
