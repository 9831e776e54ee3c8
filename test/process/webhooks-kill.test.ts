import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { runKeygate, serveKeygate, type ServedKeygate } from '../helpers/spawn-keygate.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { guard } from '../helpers/slowdown.js';

/**
 * At least once, across a crash: an instance SIGKILLed while its attempt is in flight (the receiver holds
 * the request) leaves the event in the consumer group's pending list, and another instance sends it
 * (XAUTOCLAIM, once the entry has been idle longer than a claim: KEYGATE_WEBHOOK_TIMEOUT_MS + 5 s).
 * A's attempt is still in flight when it dies: the pending count proves it (a timed-out attempt would
 * have moved the entry to the retry schedule).
 */
describe('webhooks: a killed instance leaves its event to another', () => {
  let redis: TestRedis;
  let receiver: WebhookReceiver;
  const alive: ServedKeygate[] = [];
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  let env: Record<string, string>;

  beforeAll(async () => {
    redis = await startRedis();
    receiver = await startWebhookReceiver();
    env = {
      KEYGATE_REDIS_URL: redis.url,
      // Proxy mode needs an upstream; nothing is proxied here.
      KEYGATE_UPSTREAM: 'http://127.0.0.1:9',
      KEYGATE_WEBHOOK_URL: receiver.url,
      KEYGATE_WEBHOOK_SECRET: secret,
      // The default 10 s: A is killed well within its attempt, and B takes the event over 15 s after A read it.
    };
  });
  afterAll(async () => {
    for (const k of alive) await k.stop();
    await receiver?.close();
    await redis?.stop();
  });

  it(
    'SIGKILL during the attempt: the other instance delivers the same event (same webhook-id)',
    async () => {
      // The first request is never answered: the instance that sent it is killed while it waits.
      receiver.answer = (_w, earlier) => (earlier === 0 ? 'hang' : 204);
      const a = await serveKeygate(env);
      alive.push(a);
      await a.line('webhooks: consumer group created on the audit stream');
      const created = JSON.parse(
        (await runKeygate(['keys', 'create', '--scopes', 'accounts:read', '--json'], { KEYGATE_REDIS_URL: redis.url }))
          .stdout,
      ) as { apiKey: string };
      await expect.poll(() => receiver.received.length, { timeout: guard(20_000), interval: 25 }).toBe(1);
      const first = receiver.received[0]!;

      // Claimed by A, in flight, not acknowledged: A dies.
      await a.stop('SIGKILL');
      alive.splice(alive.indexOf(a), 1);
      const r = new Redis(redis.url);
      const [pending] = (await r.call('XPENDING', 'keygate:{keystore}:audit', 'webhooks')) as [number];
      const [[, killed]] = (await r.call('XPENDING', 'keygate:{keystore}:audit', 'webhooks', '-', '+', 1)) as [
        [string, string],
      ];
      expect(pending).toBe(1);

      const b = await serveKeygate(env);
      alive.push(b);
      await expect.poll(() => receiver.received.length, { timeout: guard(40_000), interval: 50 }).toBe(2);
      const second = receiver.received[1]!;
      expect(second.id).toBe(first.id);
      const event = new Webhook(secret).verify(second.body, {
        'webhook-id': second.id,
        'webhook-timestamp': String(second.headers['webhook-timestamp']),
        'webhook-signature': String(second.headers['webhook-signature']),
      }) as { type: string; data: { apiKey: string } };
      expect(event).toMatchObject({ type: 'key.created', data: { apiKey: created.apiKey } });
      await expect.poll(() => b.metric('keygate_webhook_pending'), { timeout: guard(10_000) }).toBe(0);
      const scrape = await (await fetch(`${b.adminUrl}/metrics`)).text();
      expect(scrape).toMatch(/^keygate_webhook_deliveries_total\{outcome="delivered"\} 1$/m);
      // B logs the takeover, and removes the killed instance from the group once nothing is pending for it.
      const takeover = await b.line((l) => l.msg === 'webhook taken over');
      expect(takeover).toMatchObject({ webhookId: first.id, from: killed });
      expect(takeover.instance).not.toBe(killed);
      const consumers = async () =>
        ((await r.call('XINFO', 'CONSUMERS', 'keygate:{keystore}:audit', 'webhooks')) as unknown[][]).map((c) =>
          String(c[1]),
        );
      await expect.poll(consumers, { timeout: guard(40_000), interval: 200 }).not.toContain(killed);
      r.disconnect();
    },
    guard(90_000),
  );
});
