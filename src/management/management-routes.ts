import { auditHandlers } from './audit-handlers.js';
import { keyLifecycleHandlers } from './key-lifecycle-handlers.js';
import { keyReadHandlers } from './key-read-handlers.js';
import { keyWriteHandlers } from './key-write-handlers.js';
import { ownerHandlers } from './owner-handlers.js';
import { webhookHandlers } from './webhook-handlers.js';
import type { Handler } from './management-answer.js';

export type { Answer, Call, Handler, RouteDeps } from './management-answer.js';

/** One row of the management API: what management-server.ts checks before it calls `handle`. */
export interface Route {
  /** Shown in logs (never the apiKey itself). */
  readonly pattern: string;
  readonly method: string;
  /** Needs a write token and the Redis store. */
  readonly write: boolean;
  /** POST/PATCH: a JSON body is read (415/413/400 before the handler runs). */
  readonly body: boolean;
  readonly handle: Handler;
}

const row = (pattern: string, method: string, write: boolean, body: boolean, handle: Handler): Route => ({
  pattern,
  method,
  write,
  body,
  handle,
});

/** Every /v1/keys, /v1/owners, /v1/audit and /v1/webhooks route (the OpenAPI description is config/management-openapi.json). */
export const ROUTES: readonly Route[] = [
  row('/v1/keys', 'GET', false, false, keyReadHandlers.list),
  row('/v1/keys', 'POST', true, true, keyWriteHandlers.create),
  row('/v1/keys/{apiKey}', 'GET', false, false, keyReadHandlers.show),
  row('/v1/keys/{apiKey}', 'PATCH', true, true, keyWriteHandlers.patch),
  row('/v1/keys/{apiKey}', 'DELETE', true, false, keyLifecycleHandlers.remove),
  row('/v1/keys/{apiKey}/rotate', 'POST', true, true, keyLifecycleHandlers.rotate),
  row('/v1/keys/{apiKey}/revoke', 'POST', true, true, keyLifecycleHandlers.revoke),
  row('/v1/keys/{apiKey}/usage', 'GET', false, false, keyReadHandlers.usage),
  row('/v1/keys/{apiKey}/credits', 'POST', true, true, keyWriteHandlers.addCredits),
  // An owner's own rate limit, shared by all its keys.
  row('/v1/owners/{owner}', 'GET', false, false, ownerHandlers.show),
  row('/v1/owners/{owner}', 'PUT', true, true, ownerHandlers.put),
  row('/v1/owners/{owner}/usage', 'GET', false, false, ownerHandlers.usage),
  row('/v1/owners/{owner}/credits', 'POST', true, true, ownerHandlers.addCredits),
  row('/v1/audit', 'GET', false, false, auditHandlers.list),
  // The webhook events not yet delivered; retry-now makes one due at once.
  row('/v1/webhooks/deliveries', 'GET', false, false, webhookHandlers.list),
  row('/v1/webhooks/deliveries/{id}/retry', 'POST', true, false, webhookHandlers.retry),
];
