import { createHmac } from 'node:crypto';

/**
 * The Standard Webhooks headers of one attempt: `webhook-signature` is `v1,` and the base64 HMAC-SHA256,
 * keyed with the secret's bytes, of `<webhook-id>.<webhook-timestamp>.<body>`. The timestamp is the
 * attempt's (seconds), so a retry hours later still passes a receiver's replay window; the id is the
 * event's, the same on every attempt, so the receiver can drop a second delivery of one event.
 */
export function webhookHeaders(
  key: Uint8Array,
  id: string,
  timestampSeconds: number,
  body: string,
): Record<'webhook-id' | 'webhook-timestamp' | 'webhook-signature', string> {
  const timestamp = String(timestampSeconds);
  const mac = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': `v1,${mac}` };
}
