import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { guard } from '../helpers/slowdown.js';
import { createKeyOperations } from '../../src/operations/key-operations.js';

const WAIT = { timeout: guard(30_000), interval: 25 } as const;
const STREAM = 'keygate:{keystore}:audit';
const RETRY = 'keygate:{keystore}:webhook:retry';

/**
 * An instance's life in the consumer group: its start (nothing read before the connection is up), a
 * graceful stop during a delivery (finished within the shutdown deadline, or handed back at once), and
 * leaving the group. One instance, then a second for the rolling restart.
 */
describe('webhooks: start and graceful stop of an instance', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let receiver: WebhookReceiver;
  let r: Redis;
  const gates: RunningKeygate[] = [];
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const oracle = new Webhook(secret);

  /** An instance with webhooks; attempts wait up to a minute (a claim lasts 65 s), stops wait `shutdownMs`. */
  const start = async (shutdownMs: number) => {
    const gate = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      env: {
        KEYGATE_WEBHOOK_URL: receiver.url,
        KEYGATE_WEBHOOK_SECRET: secret,
        KEYGATE_WEBHOOK_TIMEOUT_MS: '60000',
        KEYGATE_SHUTDOWN_TIMEOUT_MS: String(shutdownMs),
      },
    });
    gates.push(gate);
    // The first instance creates the group at the stream's end: changes before it are no events.
    await expect
      .poll(async () => ((await r.call('XINFO', 'GROUPS', STREAM).catch(() => [])) as []).length, WAIT)
      .toBe(1);
    return gate;
  };
  const stop = async (gate: RunningKeygate) => {
    gates.splice(gates.indexOf(gate), 1);
    await gate.close();
  };
  const consumers = async () => {
    const list = (await r.call('XINFO', 'CONSUMERS', STREAM, 'webhooks').catch(() => [])) as unknown[][];
    return list.map((c) => String(c[1]));
  };
  /** The consumer holding the one event pending (its first attempt). */
  const holder = async () => {
    const [[, consumer]] = (await r.call('XPENDING', STREAM, 'webhooks', '-', '+', 1)) as [[string, string]];
    return consumer;
  };
  const pendingOf = async () => Number(((await r.call('XPENDING', STREAM, 'webhooks')) as [number])[0]);
  const createKey = async (gate: RunningKeygate) => {
    const ops = createKeyOperations({ store: gate.keygate.store, now: () => Date.now(), audit: () => {} });
    const made = await ops.create({ scopes: ['accounts:read'] }, 'ops');
    if (!made.ok) throw new Error('create refused');
    return made.value.record.apiKey;
  };
  const verified = (i: number) => {
    const w = receiver.received[i]!;
    return oracle.verify(w.body, {
      'webhook-id': w.id,
      'webhook-timestamp': String(w.headers['webhook-timestamp']),
      'webhook-signature': String(w.headers['webhook-signature']),
    }) as { type: string; data: { apiKey: string } };
  };

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    receiver = await startWebhookReceiver();
    r = new Redis(redis.url);
  });
  afterAll(async () => {
    for (const g of gates) await g.close();
    r?.disconnect();
    await receiver?.close();
    await upstream?.close();
    await redis?.stop();
  });
  beforeEach(() => {
    receiver.received.length = 0;
  });

  it('waits for its Redis connection before the first read: no raw client error at start', async () => {
    const a = await start(10_000);
    await expect.poll(() => a.logs.some((l) => l.includes('consumer group created')), WAIT).toBe(true);
    // What an operator reads at the default level (info and above); debug lines are for developers.
    const text = a.logs
      .join('')
      .split('\n')
      .filter((l) => !/^\{"level":(10|20),/.test(l))
      .join('\n');
    expect(text).not.toMatch(/isn't writeable|enableOfflineQueue/);
    expect(text).not.toContain('cannot read the audit stream');
    await stop(a);
  });

  it('SIGTERM during a delivery: the attempt finishes within the deadline, once, and the instance leaves the group', async () => {
    let answer!: (status: number) => void;
    receiver.answer = () => new Promise<number>((resolve) => (answer = resolve));
    const a = await start(guard(20_000));
    const apiKey = await createKey(a);
    await expect.poll(() => receiver.received.length, WAIT).toBe(1);
    const name = await holder();
    expect(await consumers()).toContain(name);
    // The stop begins while the receiver still holds the request; it answers only then.
    const stopped = stop(a);
    await new Promise((resolve) => setTimeout(resolve, 100));
    answer(204);
    await stopped;
    // Delivered and settled by A before it stopped: nothing pending, nothing scheduled, nothing left
    // for a claim to end (a second delivery).
    expect(await pendingOf()).toBe(0);
    expect(await r.zcard(RETRY)).toBe(0);
    expect(verified(0)).toMatchObject({ type: 'key.created', data: { apiKey } });
    expect(a.logs.join('')).toMatch(/"instance":"[^"]+".*"msg":"webhook delivered"/);
    // A stopped instance is no longer a consumer of the group.
    expect(await consumers()).not.toContain(name);
  });

  it('SIGTERM with an attempt still in flight at the deadline: handed back at once, and another instance sends it', async () => {
    receiver.answer = (_w, earlier) => (earlier === 0 ? 'hang' : 204);
    const a = await start(300);
    const apiKey = await createKey(a);
    await expect.poll(() => receiver.received.length, WAIT).toBe(1);
    const nameA = await holder();
    await stop(a);
    // Not left in A's pending list until its 65 s claim ends: in the retry schedule, due already. Read before the
    // other instance starts: a running one takes a due retry at its next read (its claim moves the entry's time on).
    expect(await pendingOf()).toBe(0);
    const due = await r.zrangebyscore(RETRY, '-inf', String(Date.now()));
    expect(due.map((id) => `msg_${id}`)).toEqual([receiver.received[0]!.id]);
    expect(await consumers()).not.toContain(nameA);
    const b = await start(10_000);
    await expect.poll(() => receiver.received.length, WAIT).toBe(2);
    expect(receiver.received[1]!.id).toBe(receiver.received[0]!.id);
    expect(verified(1)).toMatchObject({ type: 'key.created', data: { apiKey } });
    await expect.poll(() => pendingOf(), WAIT).toBe(0);
    await expect.poll(() => r.zcard(RETRY), WAIT).toBe(0);
    await stop(b);
  });
});
