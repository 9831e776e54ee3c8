import { AUDIT_STREAM_FIELD, parseAuditEntry, type AuditEntry } from './audit-entry.js';

/** The event types a receiver can get, one per kind of audit entry that changed something. */
export const WEBHOOK_EVENT_TYPES = [
  'key.created',
  'key.updated',
  'key.rotated',
  'key.revoked',
  'key.deleted',
  'owner.updated',
  'key.credits_added',
  'key.credits_exhausted',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/**
 * Audit action → event type. An import creates a key (or, with --replace, changes it); a previous
 * secret's grace ended early (a leak report) changes the key, which stays. Actions that change nothing
 * a receiver acts on have no event: `create-replay` (an Idempotency-Key replay), `reencrypt` (the same
 * key, sealed with the current encryption key) and the exports (read only, and never in the stream).
 * docs/management-api.md#webhooks lists the same table.
 */
export const EVENT_OF_ACTION: Readonly<Record<string, WebhookEventType>> = Object.freeze({
  create: 'key.created',
  import: 'key.created',
  update: 'key.updated',
  'import-replace': 'key.updated',
  'end-grace': 'key.updated',
  rotate: 'key.rotated',
  revoke: 'key.revoked',
  delete: 'key.deleted',
  'owner-set': 'owner.updated',
  'credits-add': 'key.credits_added',
  'credits-exhausted': 'key.credits_exhausted',
});

/** What is posted: Standard Webhooks' `{type, timestamp, data}`. */
export interface WebhookEvent {
  readonly type: WebhookEventType;
  /** When the change was made (the audit entry's `at`), not when this attempt was. */
  readonly timestamp: string;
  readonly data: Readonly<Record<string, unknown>>;
}

/**
 * The event of one audit entry, or undefined when its action has none. `data` is the entry's fields
 * (audit-entry.ts: an entry never holds a secret, only names of changed fields), without the empty ones
 * (an owner's entry names no key). A leak is `key.revoked`, or `key.updated` for an ended grace, with
 * `reason` `leaked` (LEAKED_REASON) and the report's `url` and `source`.
 */
export function webhookEvent(entry: AuditEntry): WebhookEvent | undefined {
  const type = EVENT_OF_ACTION[entry.action];
  if (!type) return undefined;
  const data: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(entry)) if (v !== '' && v !== undefined && v !== null) data[k] = v;
  return { type, timestamp: entry.at, data };
}

/** A stream entry's fields (`entry`, the JSON the store wrote) as an audit entry; undefined if it is not one. */
export function auditEntryOfFields(fields: readonly string[]): AuditEntry | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2)
    if (fields[i] === AUDIT_STREAM_FIELD) return parseAuditEntry(fields[i + 1]!);
  return undefined;
}
