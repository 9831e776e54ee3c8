import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKeygate, waitStoreReady, type RunningKeygate } from '../helpers/keygate.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { guard } from '../helpers/slowdown.js';
import { createKeyOperations, type KeyOperations } from '../../src/operations/key-operations.js';
import { createRedisStore } from '../../src/store/redis/redis-store.js';
import { AUDIT_HARD_CAP_FACTOR } from '../../src/store/webhook-queue.js';

const WAIT = { timeout: guard(60_000), interval: 50 } as const;
const STREAM = 'keygate:{keystore}:audit';
/** The audit stream's size for this test (100,000 in production): changes outpace delivery at once. */
const MAX = 4;

/**
 * Changes that outpace delivery: the writer's trim (a store with a stream of MAX entries) never removes
 * an event the consumer group has not finished, and keygate_webhook_pending counts the unread ones.
 * Past the hard cap (MAX × AUDIT_HARD_CAP_FACTOR), an event may go, but each one is counted and logged.
 */
describe('webhooks: the audit stream trim and a slow receiver', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let receiver: WebhookReceiver;
  let gate: RunningKeygate;
  let writer: ReturnType<typeof createRedisStore>;
  let ops: KeyOperations;
  let r: Redis;
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const oracle = new Webhook(secret);
  /** Every request is held until the test lets the receiver answer. */
  let open!: () => void;
  let opened = new Promise<void>((resolve) => (open = resolve));

  const metric = async (line: string) => {
    const text = await gate.keygate.metrics.registry.metrics();
    return Number(new RegExp(`^${line.replace(/[{}"]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  };
  const delivered = () =>
    new Set(
      receiver.received.map(
        (w) =>
          (
            oracle.verify(w.body, {
              'webhook-id': w.id,
              'webhook-timestamp': String(w.headers['webhook-timestamp']),
              'webhook-signature': String(w.headers['webhook-signature']),
            }) as { data: { apiKey: string } }
          ).data.apiKey,
      ),
    );
  const create = async (n: number) => {
    const made: string[] = [];
    for (let i = 0; i < n; i++) {
      const k = await ops.create({ scopes: ['accounts:read'] }, 'import');
      if (!k.ok) throw new Error('create refused');
      made.push(k.value.record.apiKey);
    }
    return made;
  };

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    receiver = await startWebhookReceiver();
    receiver.answer = () => opened.then(() => 204);
    gate = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      env: { KEYGATE_WEBHOOK_URL: receiver.url, KEYGATE_WEBHOOK_SECRET: secret, KEYGATE_WEBHOOK_TIMEOUT_MS: '60000' },
    });
    r = new Redis(redis.url);
    for (let tries = 0; ((await r.call('XINFO', 'GROUPS', STREAM).catch(() => [])) as []).length === 0; tries++) {
      if (tries > WAIT.timeout / 50) throw new Error('no consumer group on the audit stream');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    writer = createRedisStore({ url: redis.url, auditStreamMax: MAX }, { logger: pino({ level: 'silent' }) });
    await waitStoreReady(writer);
    ops = createKeyOperations({ store: writer, now: () => Date.now(), audit: () => {} });
  });
  afterAll(async () => {
    open?.();
    await gate?.close();
    await writer?.close();
    r?.disconnect();
    await receiver?.close();
    await upstream?.close();
    await redis?.stop();
  });

  it('never trims an event the group has not finished; keygate_webhook_pending counts the unread ones', async () => {
    const made = await create(6 * MAX);
    // 16 read and held by the receiver, the rest unread: all of them pending, none trimmed.
    await expect.poll(() => metric('keygate_webhook_pending'), WAIT).toBe(6 * MAX);
    expect(await r.xlen(STREAM)).toBeGreaterThanOrEqual(6 * MAX);
    open();
    await expect.poll(() => delivered().size, WAIT).toBe(6 * MAX);
    expect([...delivered()].sort()).toEqual([...made].sort());
    await expect.poll(() => metric('keygate_webhook_pending'), WAIT).toBe(0);
    expect(await metric('keygate_webhook_deliveries_total{outcome="given_up"}')).toBe(0);
    // Delivered: the next write trims the stream back to its size.
    const [last] = await create(1);
    expect(await r.xlen(STREAM)).toBe(MAX);
    await expect.poll(() => delivered().has(last!), WAIT).toBe(true);
  });

  it('past the hard cap, every event trimmed unread is counted as given up and logged', async () => {
    opened = new Promise<void>((resolve) => (open = resolve));
    const before = receiver.received.length;
    const total = AUDIT_HARD_CAP_FACTOR * MAX + 3 * MAX;
    const made = await create(total);
    expect(await r.xlen(STREAM)).toBeLessThanOrEqual(AUDIT_HARD_CAP_FACTOR * MAX);
    open();
    const sent = () => new Set(receiver.received.slice(before).map((w) => w.id)).size;
    // Each event either reaches the receiver or is counted as given up: none vanishes.
    await expect
      .poll(async () => sent() + (await metric('keygate_webhook_deliveries_total{outcome="given_up"}')), WAIT)
      .toBe(total);
    expect(await metric('keygate_webhook_deliveries_total{outcome="given_up"}')).toBeGreaterThan(0);
    expect(gate.logs.join('')).toContain('trimmed from the audit stream before they were delivered');
    await expect.poll(() => metric('keygate_webhook_pending'), WAIT).toBe(0);
    expect(made).toHaveLength(total);
  });
});
