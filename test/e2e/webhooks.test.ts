import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { managementClient, writeTokensFile, type ManagementClient } from '../helpers/management.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { guard } from '../helpers/slowdown.js';
import { manualClock } from '../../src/clock.js';
import type { Config } from '../../src/config/load-config.js';

/** Retries after 300 ms instead of 5 s: the order of events is what is asserted, never how fast they come. */
const QUICK_RETRIES = (c: Config): Config => ({
  ...c,
  webhook: c.webhook && { ...c.webhook, retryDelaysMs: [300] },
});

const WAIT = { timeout: guard(30_000), interval: 50 } as const;

/**
 * The first Keygate with webhooks creates the consumer group at the stream's end: changes made before
 * that are not events. Wait for it before changing anything.
 */
async function groupCreated(url: string): Promise<void> {
  const r = new Redis(url);
  const deadline = Date.now() + WAIT.timeout;
  try {
    for (;;) {
      const groups = (await r.call('XINFO', 'GROUPS', 'keygate:{keystore}:audit').catch(() => [])) as unknown[][];
      if (groups.some((g) => g.includes('webhooks'))) return;
      if (Date.now() > deadline) throw new Error('no Keygate created the webhooks consumer group');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    r.disconnect();
  }
}

type Body = { type: string; timestamp: string; data: Record<string, unknown> };

describe('signed webhooks: the audit stream through a consumer group, two instances on one Redis', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let receiver: WebhookReceiver;
  let a: RunningKeygate;
  let b: RunningKeygate;
  let onA: ManagementClient;
  let onB: ManagementClient;
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  /** The oracle: the standardwebhooks package verifies every delivery, not code of ours. */
  const oracle = new Webhook(secret);
  const secrets: string[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    receiver = await startWebhookReceiver();
    const tokens = writeTokensFile([{ name: 'settings-backend', access: 'write' }]);
    const env = {
      KEYGATE_MANAGEMENT_PORT: '0',
      KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file,
      KEYGATE_WEBHOOK_URL: receiver.url,
      KEYGATE_WEBHOOK_SECRET: secret,
      KEYGATE_WEBHOOK_TIMEOUT_MS: '1000',
    };
    a = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env, adjust: QUICK_RETRIES });
    b = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env, adjust: QUICK_RETRIES });
    const token = tokens.tokens['settings-backend'] as string;
    await groupCreated(redis.url);
    onA = managementClient(a.managementUrl as string, token);
    onB = managementClient(b.managementUrl as string, token);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await receiver?.close();
    await upstream?.close();
    await redis?.stop();
  });
  beforeEach(() => {
    receiver.answer = () => 204;
  });

  const verified = (w: ReceivedWebhook): Body =>
    oracle.verify(w.body, {
      'webhook-id': String(w.headers['webhook-id']),
      'webhook-timestamp': String(w.headers['webhook-timestamp']),
      'webhook-signature': String(w.headers['webhook-signature']),
    }) as Body;
  const createKey = async (api: ManagementClient, json: Record<string, unknown>) => {
    const r = await api.call('POST', '/v1/keys', { json });
    expect(r.status).toBe(201);
    const k = r.json() as { apiKey: string; id: string; apiSecret: string };
    secrets.push(k.apiSecret);
    return k;
  };
  const forKey = (apiKey: string) => receiver.received.filter((w) => verified(w).data.apiKey === apiKey);
  const metric = async (gate: RunningKeygate, line: string) => {
    const text = await gate.keygate.metrics.registry.metrics();
    return Number(new RegExp(`^${line.replace(/[{}"]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  };

  it('sends each key event once, signed (verified by standardwebhooks), whichever instance made the change', async () => {
    const first = receiver.received.length;
    const k1 = await createKey(onA, { owner: 'acct_1', scopes: ['accounts:read'] });
    const k2 = await createKey(onB, { scopes: ['accounts:read'] });
    expect(
      (await onB.call('PATCH', `/v1/keys/${k1.apiKey}`, { json: { scopes: ['accounts:read', 'orders:write'] } }))
        .status,
    ).toBe(200);
    const rotated = await onA.call('POST', `/v1/keys/${k1.apiKey}/rotate`, { json: { graceSeconds: 60 } });
    secrets.push((rotated.json() as { apiSecret: string }).apiSecret);
    expect((await onB.call('POST', `/v1/keys/${k1.apiKey}/revoke`, { json: { reason: 'leaked' } })).status).toBe(200);
    expect((await onA.call('DELETE', `/v1/keys/${k2.apiKey}`)).status).toBe(204);
    expect(
      (await onA.call('PUT', '/v1/owners/acct_1', { json: { rateLimit: { rate: '5/h', burst: 5 } } })).status,
    ).toBe(200);

    // Every entry of the audit stream with an event, by its stream id: the webhook-id is msg_<id>.
    const audit = new Redis(redis.url);
    const entries = (await audit.xrange('keygate:{keystore}:audit', '-', '+')) as Array<[string, string[]]>;
    audit.disconnect();
    const expected = entries.map(([id]) => `msg_${id}`);
    expect(expected).toHaveLength(7);
    await expect.poll(() => new Set(receiver.received.slice(first).map((w) => w.id)).size, WAIT).toBe(7);
    // Settled everywhere (nothing pending), and still each once: no instance sent one the other did.
    await expect.poll(() => metric(a, 'keygate_webhook_pending'), WAIT).toBe(0);
    await expect.poll(() => metric(b, 'keygate_webhook_pending'), WAIT).toBe(0);
    const got = receiver.received.slice(first);
    expect(got.map((w) => w.id).sort()).toEqual([...expected].sort());

    const bodies = got.map(verified);
    expect(bodies.map((e) => e.type).sort()).toEqual(
      [
        'key.created',
        'key.created',
        'key.updated',
        'key.rotated',
        'key.revoked',
        'key.deleted',
        'owner.updated',
      ].sort(),
    );
    const revoked = bodies.find((e) => e.type === 'key.revoked')!;
    // A revoke for a leak is a key.revoked with reason "leaked" (what a receiver alerts on).
    expect(revoked.data).toMatchObject({
      apiKey: k1.apiKey,
      id: k1.id,
      owner: 'acct_1',
      actor: 'settings-backend',
      action: 'revoke',
      reason: 'leaked',
    });
    const updated = bodies.find((e) => e.type === 'key.updated')!;
    expect(updated.data).toMatchObject({ apiKey: k1.apiKey, changes: ['scopes'] });
    expect(bodies.find((e) => e.type === 'owner.updated')!.data).toMatchObject({
      owner: 'acct_1',
      action: 'owner-set',
    });
    expect(Date.parse(revoked.timestamp)).not.toBeNaN();
    for (const w of got) {
      expect(w.headers['content-type']).toBe('application/json');
      expect(String(w.headers['webhook-signature'])).toMatch(/^v1,[A-Za-z0-9+/]+={0,2}$/);
      for (const s of secrets) expect(w.body).not.toContain(s);
    }
    expect(
      (await metric(a, 'keygate_webhook_deliveries_total{outcome="delivered"}')) +
        (await metric(b, 'keygate_webhook_deliveries_total{outcome="delivered"}')),
    ).toBeGreaterThanOrEqual(7);
  });

  it('retries a delivery answered 500 with the same webhook-id, a new timestamp and signature, until it is 2xx', async () => {
    receiver.answer = (_w, earlier) => (earlier < 2 ? 500 : 204);
    const k = await createKey(onA, { scopes: ['accounts:read'] });
    await expect.poll(() => forKey(k.apiKey).length, WAIT).toBe(3);
    await expect.poll(() => metric(a, 'keygate_webhook_pending'), WAIT).toBe(0);
    const attempts = forKey(k.apiKey);
    expect(new Set(attempts.map((w) => w.id)).size).toBe(1);
    // The body is the event's, the same on every attempt; each attempt is signed afresh.
    expect(new Set(attempts.map((w) => w.body)).size).toBe(1);
    expect(attempts.every((w) => verified(w).type === 'key.created')).toBe(true);
    const failed =
      (await metric(a, 'keygate_webhook_deliveries_total{outcome="failed"}')) +
      (await metric(b, 'keygate_webhook_deliveries_total{outcome="failed"}'));
    expect(failed).toBeGreaterThanOrEqual(2);
    // No fourth attempt once it was delivered.
    expect(forKey(k.apiKey)).toHaveLength(3);
  });

  it('retries an attempt the receiver never answers (KEYGATE_WEBHOOK_TIMEOUT_MS) with the same webhook-id', async () => {
    receiver.answer = (_w, earlier) => (earlier === 0 ? 'hang' : 204);
    const k = await createKey(onB, { scopes: ['accounts:read'] });
    await expect.poll(() => forKey(k.apiKey).length, WAIT).toBe(2);
    const [held, retry] = forKey(k.apiKey);
    expect(retry!.id).toBe(held!.id);
    verified(retry!);
  });

  it('keeps /readyz ready while the receiver fails', async () => {
    receiver.answer = () => 503;
    await createKey(onA, { scopes: ['accounts:read'] });
    await expect.poll(() => metric(a, 'keygate_webhook_pending'), WAIT).toBeGreaterThan(0);
    expect(await a.keygate.ready()).toBeUndefined();
    receiver.answer = () => 204;
    await expect.poll(() => metric(a, 'keygate_webhook_pending'), WAIT).toBe(0);
  });
});

describe('webhooks: retries end after 24 h (the clock driven by the test)', () => {
  it('gives an event up with the first failed attempt 24 h after its first one, and counts it', async () => {
    const redis = await startRedis();
    const upstream = await startRecordingUpstream();
    const receiver = await startWebhookReceiver();
    // The receiver has the request before Keygate has its answer; a short wait keeps those two moments apart, as on
    // any real network. The next attempt is scheduled from the moment the answer came, on the test's clock.
    receiver.answer = () => new Promise((resolve) => setTimeout(() => resolve(500), 100));
    const tokens = writeTokensFile([{ name: 'ops', access: 'write' }]);
    const clock = manualClock();
    const gate = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      clock,
      env: {
        KEYGATE_MANAGEMENT_PORT: '0',
        KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file,
        KEYGATE_WEBHOOK_URL: receiver.url,
        KEYGATE_WEBHOOK_SECRET: `whsec_${randomBytes(24).toString('base64')}`,
      },
    });
    try {
      const api = managementClient(gate.managementUrl as string, tokens.tokens.ops as string);
      await groupCreated(redis.url);
      expect((await api.call('POST', '/v1/keys', { json: { scopes: ['accounts:read'] } })).status).toBe(201);
      const text = () => gate.keygate.metrics.registry.metrics();
      const count = async (outcome: string) =>
        Number(
          new RegExp(`^keygate_webhook_deliveries_total\\{outcome="${outcome}"\\} (\\S+)$`, 'm').exec(
            await text(),
          )?.[1],
        );
      /**
       * Attempt `n` was sent and its failure settled: the next attempt is scheduled, from the test's clock as it was
       * then. Only after that may the test move the clock (moved while the answer is on its way, the next attempt
       * would be scheduled from the moved clock).
       */
      const failedAttempts = async (n: number) => {
        await expect.poll(() => receiver.received.length, WAIT).toBe(n);
        await expect.poll(() => count('failed'), WAIT).toBe(n);
      };
      await failedAttempts(1);
      await expect.poll(async () => /keygate_webhook_pending 1$/m.test(await text()), WAIT).toBe(true);
      // The schedule is the default one (5 s first): nothing more comes until the test moves the clock.
      clock.advance(5_000);
      await failedAttempts(2);
      clock.advance(23 * 3_600_000);
      await failedAttempts(3);
      expect(await count('given_up')).toBe(0);
      clock.advance(2 * 3_600_000);
      await expect.poll(() => receiver.received.length, WAIT).toBe(4);
      await expect.poll(() => count('given_up'), WAIT).toBe(1);
      expect(await count('failed')).toBe(3);
      await expect.poll(async () => /keygate_webhook_pending 0$/m.test(await text()), WAIT).toBe(true);
      expect(new Set(receiver.received.map((w) => w.id)).size).toBe(1);
    } finally {
      await gate.close();
      await receiver.close();
      await upstream.close();
      await redis.stop();
    }
  });
});
