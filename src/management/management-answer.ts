// Tested in test/unit/management-routes.test.ts, test/e2e/management-api.test.ts.
import type { ManagementError } from '../errors.js';
import { publicView, type KeyRecord } from '../keys/key-record.js';
import { lastUsedAt } from '../keys/key-usage.js';
import type { Store } from '../store/store.js';
import type { KeyOperations } from '../operations/key-operations.js';
import type { Refusal } from '../operations/outcome.js';
import type { AuditReader } from '../operations/audit-reader.js';
import type { OwnerOperations } from '../operations/owner-operations.js';
import type { WebhookOperations } from '../operations/webhook-operations.js';

/**
 * What a handler decided: a JSON answer, or a catalogue error (src/errors.ts
 * MANAGEMENT_ERRORS) that management-server.ts's fail() renders with its status.
 */
export type Answer =
  | { readonly status: number; readonly body?: unknown; readonly headers?: Readonly<Record<string, string>> }
  | {
      readonly error: ManagementError;
      readonly message?: string;
      readonly problems?: readonly string[];
      /** The key's current version, on a 409 after a concurrent change. */
      readonly version?: number;
    };

/** One call, already authenticated and authorised, its body parsed: all a handler sees of HTTP. */
export interface Call {
  /** The {apiKey} path parameter, decoded; undefined on /v1/keys. */
  readonly apiKey: string | undefined;
  /** The {owner} path parameter of /v1/owners/{owner}, decoded. */
  readonly owner?: string | undefined;
  /** The {id} path parameter of /v1/webhooks/deliveries/{id}/retry: an event's webhook-id. */
  readonly event?: string | undefined;
  readonly query: URLSearchParams;
  /** The parsed JSON body; undefined when the request had none. */
  readonly body: unknown;
  /** The token's name: the actor in the audit stream. */
  readonly actor: string;
  readonly idempotencyKey: string | undefined;
}

export interface RouteDeps {
  readonly ops: KeyOperations;
  /** Owners' own limits; absent: the owner routes answer 400. */
  readonly owners?: OwnerOperations;
  readonly store: Pick<Store, 'getUsage'>;
  readonly now: () => number;
  /** The audit log's reader; absent with the embedded store (no audit log): GET /v1/audit answers 501. */
  readonly audit?: AuditReader;
  /** The delivery list and retry-now; absent with the embedded store (no webhooks): /v1/webhooks answers 501. */
  readonly webhooks?: WebhookOperations;
}

/** A handler: a function from a parsed call to an answer. */
export type Handler = (call: Call, deps: RouteDeps) => Promise<Answer>;

export const invalid = (problems: readonly string[]): Answer => ({ error: 'invalid_request', problems });

/** The record parser names fields "key.scopes"; in an answer they are the request's: "body.scopes". */
export const asBody = (problems: readonly string[]) =>
  problems.map((p) => p.replace(/^key\./, 'body.').replace(/^owner\.rateLimit/, 'body.rateLimit'));

/** A refused operation as an answer: 404, 400 (the record parser's problems) or 409. */
export function refusal(r: Refusal): Answer {
  if (r.refused === 'not_found') return { error: 'not_found' };
  if (r.refused === 'invalid') return invalid(asBody(r.problems));
  return { error: 'conflict', message: r.message, ...(r.version !== undefined && { version: r.version }) };
}

/** A key as every answer shows it: the keys file's field names, `status`, `lastUsedAt`; never a secret. */
export async function keyView(record: KeyRecord, deps: RouteDeps): Promise<Record<string, unknown>> {
  const view = { ...publicView(record, deps.now()), lastUsedAt: lastUsedAt(await deps.store.getUsage(record.apiKey)) };
  // The credits as they stand (the admit state's balance, the next refill), not as they were set.
  return record.credits ? { ...view, credits: await deps.ops.credits(record) } : view;
}
