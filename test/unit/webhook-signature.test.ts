import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { webhookHeaders } from '../../src/observe/webhook-signature.js';

describe('webhookHeaders: Standard Webhooks signatures, checked by the standardwebhooks package', () => {
  const key = randomBytes(32);
  const oracle = new Webhook(`whsec_${key.toString('base64')}`);
  const now = () => Math.floor(Date.now() / 1000);

  it('signs id.timestamp.body so that the reference verifier accepts it', () => {
    const body = JSON.stringify({ type: 'key.revoked', timestamp: new Date().toISOString(), data: { apiKey: 'kg_1' } });
    const headers = webhookHeaders(key, 'msg_1700000000000-0', now(), body);
    expect(headers['webhook-id']).toBe('msg_1700000000000-0');
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+={0,2}$/);
    expect(oracle.verify(body, headers)).toEqual(JSON.parse(body));
  });

  it('is refused by the verifier for another body, another id, another key or a stale timestamp', () => {
    const body = '{"type":"key.created","timestamp":"2026-01-01T00:00:00.000Z","data":{}}';
    const headers = webhookHeaders(key, 'msg_1-0', now(), body);
    expect(() => oracle.verify(body.replace('created', 'deleted'), headers)).toThrow();
    expect(() => oracle.verify(body, { ...headers, 'webhook-id': 'msg_2-0' })).toThrow();
    expect(() => oracle.verify(body, webhookHeaders(randomBytes(32), 'msg_1-0', now(), body))).toThrow();
    expect(() => oracle.verify(body, webhookHeaders(key, 'msg_1-0', now() - 3600, body))).toThrow();
  });
});
