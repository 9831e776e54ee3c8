import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRedisKeyStore } from '../../src/cli/keys/open-key-store.js';
import type { Config } from '../../src/config/load-config.js';
import type { DeliveryPage, DeliveryView } from '../../src/operations/webhook-operations.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { createOpenApiCheck, managementClient, writeTokensFile, type ManagementClient } from '../helpers/management.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { guard } from '../helpers/slowdown.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { runCli } from '../helpers/cli-run.js';

/** Ten minutes before any retry: longer than any wait here, so an event that arrives came by retry-now. */
const RETRY_DELAY_MS = 600_000;
const SLOW_RETRIES = (c: Config): Config => ({
  ...c,
  webhook: c.webhook && { ...c.webhook, retryDelaysMs: [RETRY_DELAY_MS] },
});
const WAIT = { timeout: guard(30_000), interval: 50 } as const;

describe('webhook deliveries: the list of events not yet delivered, and retry-now (API and CLI)', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let receiver: WebhookReceiver;
  let gate: RunningKeygate;
  let embedded: RunningKeygate;
  let writer: ManagementClient;
  let reader: ManagementClient;
  let onEmbedded: ManagementClient;
  const openapi = createOpenApiCheck();

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    receiver = await startWebhookReceiver();
    const tokens = writeTokensFile([
      { name: 'backend', access: 'write' },
      { name: 'oncall', access: 'read' },
    ]);
    const env = { KEYGATE_MANAGEMENT_PORT: '0', KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file };
    const webhooks = {
      ...env,
      KEYGATE_WEBHOOK_URL: `${receiver.url}?code=receiver-credential`,
      KEYGATE_WEBHOOK_SECRET: `whsec_${Buffer.alloc(32, 7).toString('base64')}`,
      // An attempt held by the receiver lasts until the test answers it.
      KEYGATE_WEBHOOK_TIMEOUT_MS: '60000',
    };
    gate = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env: webhooks, adjust: SLOW_RETRIES });
    embedded = await startKeygate({ upstream: upstream.url, env });
    writer = managementClient(gate.managementUrl as string, tokens.tokens.backend as string, openapi);
    reader = managementClient(gate.managementUrl as string, tokens.tokens.oncall as string, openapi);
    onEmbedded = managementClient(embedded.managementUrl as string, tokens.tokens.backend as string, openapi);
    // Changes made before the consumer group exists are no events.
    const r = new Redis(redis.url);
    const deadline = Date.now() + WAIT.timeout;
    while (
      !JSON.stringify(await r.call('XINFO', 'GROUPS', 'keygate:{keystore}:audit').catch(() => [])).includes('webhooks')
    ) {
      if (Date.now() > deadline) throw new Error('Keygate created no webhooks consumer group');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    r.disconnect();
  });
  afterAll(async () => {
    await gate?.close();
    await embedded?.close();
    await receiver?.close();
    await upstream?.close();
    await redis?.stop();
  });

  /** A key created: its key.created event's webhook-id, from the audit stream entry the change wrote. */
  const createKey = async () => {
    const r = await writer.call('POST', '/v1/keys', { json: { scopes: ['accounts:read'] } });
    expect(r.status).toBe(201);
    const apiKey = (r.json() as { apiKey: string }).apiKey;
    const audit = new Redis(redis.url);
    const entries = (await audit.xrange('keygate:{keystore}:audit', '-', '+')) as Array<[string, string[]]>;
    audit.disconnect();
    const [id] = entries.find(([, fields]) => (fields[1] ?? '').includes(apiKey)) as [string, string[]];
    return `msg_${id}`;
  };
  const deliveries = async (query = ''): Promise<DeliveryPage> => {
    const r = await reader.call('GET', `/v1/webhooks/deliveries${query}`);
    expect(r.status).toBe(200);
    // Never the receiver's address or its credential, whatever the last error was.
    expect(r.body).not.toContain('receiver-credential');
    expect(r.body).not.toContain(new URL(receiver.url).host);
    return r.json() as DeliveryPage;
  };
  const listed = async (id: string) => (await deliveries()).deliveries.find((d) => d.id === id);
  const arrived = (id: string) => receiver.received.filter((w) => w.id === id).length;

  it('lists an event the receiver was down for, with its last error and next attempt; retry-now delivers it before that', async () => {
    await receiver.down();
    const id = await createKey();
    await expect.poll(async () => (await listed(id))?.attempts, WAIT).toBe(1);
    const waiting = (await listed(id)) as DeliveryView;
    expect(waiting).toMatchObject({
      id,
      type: 'key.created',
      state: 'waiting',
      lastError: 'ECONNREFUSED',
      instance: null,
    });
    // The schedule: the retry delay after the failed attempt, which came after the change.
    const due = Date.parse(waiting.nextAttemptAt as string);
    expect(due).toBeGreaterThanOrEqual(Date.parse(waiting.createdAt) + RETRY_DELAY_MS);

    // A read token lists but cannot retry.
    const refused = await reader.call('POST', `/v1/webhooks/deliveries/${id}/retry`);
    expect([refused.status, (refused.json() as { error: string }).error]).toEqual([403, 'read_only_token']);

    await receiver.up();
    const retried = await writer.call('POST', `/v1/webhooks/deliveries/${id}/retry`);
    expect(retried.status).toBe(202);
    expect((retried.json() as { id: string }).id).toBe(id);
    await expect.poll(() => arrived(id), WAIT).toBe(1);
    expect(Date.now()).toBeLessThan(due);
    await expect.poll(async () => (await listed(id)) === undefined, WAIT).toBe(true);

    // Delivered: nothing waits by that id any more; nor by an unknown or a malformed one.
    for (const unknown of [id, 'msg_1-0', 'not-an-event']) {
      const r = await writer.call('POST', `/v1/webhooks/deliveries/${unknown}/retry`);
      expect([r.status, (r.json() as { error: string }).error]).toEqual([404, 'not_found']);
    }
    expect(arrived(id)).toBe(1);
  });

  it('shows an event being attempted with the instance attempting it, and refuses to retry it meanwhile (409)', async () => {
    let release: (status: number) => void = () => {};
    receiver.answer = (_w, earlier) => (earlier === 0 ? new Promise<number>((r) => (release = r)) : 204);
    try {
      const id = await createKey();
      await expect.poll(() => arrived(id), WAIT).toBe(1);
      const held = (await listed(id)) as DeliveryView;
      expect(held).toMatchObject({ id, state: 'attempting', attempts: 0, nextAttemptAt: null });
      expect(held.instance).toMatch(/^.+:\d+:[0-9a-f]{8}$/);
      const r = await writer.call('POST', `/v1/webhooks/deliveries/${id}/retry`);
      expect(r.status).toBe(409);
      expect((r.json() as { message: string }).message).toContain(held.instance);
      // The attempt fails (503): it waits for its retry, which retry-now then hurries.
      release(503);
      await expect.poll(async () => (await listed(id))?.lastError, WAIT).toBe('503');
      expect((await writer.call('POST', `/v1/webhooks/deliveries/${id}/retry`)).status).toBe(202);
      await expect.poll(() => arrived(id), WAIT).toBe(2);
      // One attempt at a time: the refused retry-now added none.
      await expect.poll(async () => (await listed(id)) === undefined, WAIT).toBe(true);
      expect(arrived(id)).toBe(2);
    } finally {
      receiver.answer = () => 204;
    }
  });

  it('pages oldest first with limit and cursor', async () => {
    await receiver.down();
    const ids = [await createKey(), await createKey(), await createKey()];
    await expect
      .poll(
        async () => (await deliveries()).deliveries.filter((d) => ids.includes(d.id) && d.attempts === 1).length,
        WAIT,
      )
      .toBe(3);
    const first = await deliveries('?limit=2');
    expect(first.deliveries.map((d) => d.id)).toEqual(ids.slice(0, 2));
    expect(first.nextCursor).toBe(ids[1]!.slice('msg_'.length));
    const second = await deliveries(`?limit=2&cursor=${first.nextCursor}`);
    expect(second.deliveries.map((d) => d.id)).toEqual(ids.slice(2));
    const bad = await reader.call('GET', '/v1/webhooks/deliveries?limit=0&cursor=x');
    expect((bad.json() as { problems: string[] }).problems).toEqual([
      'query.limit: an integer from 1 to 1000',
      "query.cursor: a page's nextCursor, as it was given",
    ]);
    await receiver.up();
    for (const id of ids) expect((await writer.call('POST', `/v1/webhooks/deliveries/${id}/retry`)).status).toBe(202);
    await expect.poll(() => ids.map(arrived), WAIT).toEqual([1, 1, 1]);
  });

  it('keygate webhooks list and retry: the same list and retry-now from the command line', async () => {
    const cli = async (...args: string[]) => {
      return runCli(args, { env: { KEYGATE_REDIS_URL: redis.url }, openKeyStore: openRedisKeyStore });
    };
    await receiver.down();
    const id = await createKey();
    await expect.poll(async () => (await listed(id))?.attempts, WAIT).toBe(1);
    const text = await cli('webhooks', 'list');
    expect(text.code).toBe(0);
    expect(text.out).toMatch(
      new RegExp(`^${id} {2}key\\.created {2}waiting {2}attempts=1 {2}next=\\S+Z {2}last=ECONNREFUSED {2}-$`, 'm'),
    );
    const json = await cli('webhooks', 'list', '--json');
    expect(JSON.parse(json.out)).toEqual((await deliveries()).deliveries);

    await receiver.up();
    const retried = await cli('webhooks', 'retry', id);
    expect([retried.code, retried.out]).toEqual([0, expect.stringMatching(new RegExp(`^${id} due now \\(`))]);
    await expect.poll(() => arrived(id), WAIT).toBe(1);
    const unknown = await cli('webhooks', 'retry', 'msg_1-0');
    expect([unknown.code, unknown.err]).toEqual([1, expect.stringContaining('no webhook event msg_1-0 is waiting')]);
  });

  it('with the embedded store there are no webhooks: 501 webhooks_need_redis', async () => {
    for (const [method, path] of [
      ['GET', '/v1/webhooks/deliveries'],
      ['POST', '/v1/webhooks/deliveries/msg_1-0/retry'],
    ] as const) {
      const r = await onEmbedded.call(method, path);
      expect([r.status, (r.json() as { error: string }).error]).toEqual([501, 'webhooks_need_redis']);
    }
  });
});
