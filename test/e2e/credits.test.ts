import { Agent } from 'node:http';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCOUNTS_PATH, PUBLISHED_WITHIN } from '../helpers/constants.js';
import { bearer, send, type Reply } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { createOpenApiCheck, managementClient, writeTokensFile, type ManagementClient } from '../helpers/management.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { guard } from '../helpers/slowdown.js';
import { token } from '../helpers/tokens.js';

/**
 * Credits over the wire: spent in the admit step, exact across instances. 3,000 requests sent at once
 * from four clients (keep-alive agents of 32 connections each) against 1,000 credits: exactly 1,000
 * reach the upstream and 2,000 are answered 429 10429 credits_exhausted, on two Keygate instances on
 * one Redis (a key's credits; an owner's shared by three keys; a top-up in the middle of a flood), and
 * on the embedded store.
 */
let seq = 0;
/** A nonce no other request of this file uses (random nonces could collide among 3,000 in one millisecond). */
const nonce = () => (BigInt(Date.now()) * 1_000_000n + BigInt(seq++ % 1_000_000)).toString();

const clients = Array.from({ length: 4 }, () => new Agent({ keepAlive: true, maxSockets: 32 }));
afterAll(() => clients.forEach((c) => c.destroy()));

/** `n` requests at once, spread over the gates, the keys and the clients; the replies in order. */
function flood(gates: RunningKeygate[], keys: { apiKey: string; secret: string }[], n: number): Promise<Reply[]> {
  return Promise.all(
    Array.from({ length: n }, (_, i) => {
      const key = keys[i % keys.length]!;
      return send(gates[i % gates.length]!.url, ACCOUNTS_PATH, {
        headers: bearer(token(key.apiKey, key.secret, { nonce: nonce() })),
        agent: clients[i % clients.length],
        timeoutMs: 60_000,
      });
    }),
  );
}

function tally(replies: Reply[]) {
  const forwarded = replies.filter((r) => r.status === 200).length;
  const exhausted = replies.filter(
    (r) => r.status === 429 && (r.json() as { code: number }).code === 10429 && r.headers['retry-after'] === undefined,
  ).length;
  const other = replies.filter((r) => r.status !== 200).length - exhausted;
  // Anything else, named in the failure: its status and body.
  if (other > 0)
    console.log(
      '[credits] other answers:',
      replies
        .filter((r) => r.status !== 200 && r.status !== 429)
        .slice(0, 3)
        .map((r) => `${r.status} ${r.body}`),
      replies.filter((r) => r.status === 429 && r.headers['retry-after'] !== undefined).length,
    );
  return { forwarded, exhausted, other };
}

describe('credits: two instances on one Redis', { timeout: guard(120_000) }, () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let a: RunningKeygate;
  let b: RunningKeygate;
  let writer: ManagementClient;
  let admin: Redis;

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    const tokens = writeTokensFile([{ name: 'billing', access: 'write' }]);
    // Long waits for Redis and for an upstream connection: on a loaded machine a 503 after the admit (a
    // command past its deadline that Redis still ran, a queue wait that ran out) has spent its credits
    // without forwarding (docs/keys.md#credits), which is not what this file counts.
    const env = {
      KEYGATE_MANAGEMENT_PORT: '0',
      KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file,
      KEYGATE_REDIS_TIMEOUT_MS: '30000',
      KEYGATE_UPSTREAM_QUEUE_TIMEOUT_MS: '30000',
    };
    a = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env });
    b = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env });
    writer = managementClient(a.managementUrl as string, tokens.tokens.billing as string, createOpenApiCheck());
    admin = new Redis(redis.url);
  });
  afterAll(async () => {
    admin?.disconnect();
    await a?.close();
    await b?.close();
    await upstream?.close();
    await redis?.stop();
  });

  async function createKey(body: Record<string, unknown>): Promise<{ apiKey: string; secret: string }> {
    const r = await writer.call('POST', '/v1/keys', { json: { scopes: ['accounts:read'], ...body } });
    expect(r.status, r.body).toBe(201);
    const k = r.json() as { apiKey: string; apiSecret: string };
    // Both instances know the key (its change message arrived), so no request is answered 404 for it.
    await expect
      .poll(() => [a, b].every((g) => g.keygate.store.mayHaveKey?.(k.apiKey) ?? true), PUBLISHED_WITHIN)
      .toBe(true);
    return { apiKey: k.apiKey, secret: k.apiSecret };
  }
  const forwardedCount = () => upstream.received.length;
  /** The credits_exhausted events (audit entries, from which the webhooks are sent) naming `who`. */
  async function exhaustedEvents(who: { apiKey?: string; owner?: string }): Promise<number> {
    const all = (await admin.xrange('keygate:{keystore}:audit', '-', '+')) as [string, string[]][];
    return all
      .map(([, f]) => JSON.parse(f[1] as string) as { action: string; apiKey: string; owner?: string })
      .filter((e) => e.action === 'credits-exhausted')
      .filter((e) => (who.apiKey ? e.apiKey === who.apiKey : e.apiKey === '' && e.owner === who.owner)).length;
  }

  it("a key's 1,000 credits: of 3,000 requests at once on two instances exactly 1,000 are forwarded, 2,000 answered 429 credits_exhausted; one exhausted event", async () => {
    const key = await createKey({ credits: { remaining: 1000 } });
    const before = forwardedCount();
    const replies = await flood([a, b], [key], 3000);
    expect(tally(replies)).toEqual({ forwarded: 1000, exhausted: 2000, other: 0 });
    expect(forwardedCount() - before).toBe(1000);
    const refused = replies.find((r) => r.status === 429)!;
    expect(refused.headers['ratelimit-policy']).toBe('"keygate-credits";q=1000');
    expect(refused.headers.ratelimit).toBe('"keygate-credits";r=0');
    const passed = replies.filter((r) => r.status === 200).map((r) => r.headers.ratelimit);
    expect(passed).toContain('"keygate-credits";r=0');
    expect(passed).toContain('"keygate-credits";r=999');
    await expect.poll(() => a.logs.concat(b.logs).some((l) => l.includes('"reason":"credits_exhausted"'))).toBe(true);
    const shown = (await writer.call('GET', `/v1/keys/${key.apiKey}`)).json() as { credits: unknown };
    expect(shown.credits).toEqual({ remaining: 0, refill: null, nextRefillAt: null });
    await expect.poll(() => exhaustedEvents({ apiKey: key.apiKey }), PUBLISHED_WITHIN).toBe(1);
  });

  it("an owner's 1,000 credits shared by three keys: exactly 1,000 of 3,000 forwarded; a key's own refill gives Retry-After", async () => {
    const put = await writer.call('PUT', '/v1/owners/pool', { json: { credits: { remaining: 1000 } } });
    expect(put.status, put.body).toBe(200);
    await expect
      .poll(() => [a, b].map((g) => g.keygate.store.ownerCredits('pool')?.remaining), PUBLISHED_WITHIN)
      .toEqual([1000, 1000]);
    const keys = [
      await createKey({ owner: 'pool' }),
      await createKey({ owner: 'pool', credits: { remaining: 5000, refill: { amount: 5000, interval: 'day' } } }),
      await createKey({ owner: 'pool' }),
    ];
    const before = forwardedCount();
    const replies = await flood([a, b], keys, 3000);
    expect(tally(replies)).toEqual({ forwarded: 1000, exhausted: 2000, other: 0 });
    expect(forwardedCount() - before).toBe(1000);
    const owner = (await writer.call('GET', '/v1/owners/pool')).json() as { credits: { remaining: number } };
    expect(owner.credits.remaining).toBe(0);
    await expect.poll(() => exhaustedEvents({ owner: 'pool' }), PUBLISHED_WITHIN).toBe(1);
    // The key with a daily refill: its own quota is listed beside the owner's, with the seconds to its refill.
    const second = replies.find((r, i) => i % 3 === 1 && r.status === 200)!;
    expect(second.headers['ratelimit-policy']).toBe('"keygate-credits";q=5000;w=86400, "keygate-owner-credits";q=1000');
    expect(second.headers.ratelimit).toMatch(/^"keygate-credits";r=\d+;t=\d+, "keygate-owner-credits";r=\d+$/);
  });

  it('a top-up during a flood is counted exactly: 500 credits + 300 added while 2,000 requests run = 800 forwarded', async () => {
    const key = await createKey({ credits: { remaining: 500 } });
    const before = forwardedCount();
    const running = flood([a, b], [key], 2000);
    await expect.poll(() => forwardedCount() - before, { timeout: 60_000, interval: 5 }).toBeGreaterThan(100);
    const top = await writer.call('POST', `/v1/keys/${key.apiKey}/credits`, { json: { add: 300 } });
    expect(top.status, top.body).toBe(200);
    expect((top.json() as { remaining: number }).remaining).toBeLessThan(800);
    const replies = await running;
    const t = tally(replies);
    // Every one of the 800 was spent: the flood outlasts the credits (if it did not, the rest are still there).
    const left = ((await writer.call('GET', `/v1/keys/${key.apiKey}`)).json() as { credits: { remaining: number } })
      .credits.remaining;
    expect(t.forwarded + left).toBe(800);
    expect(t.forwarded + t.exhausted).toBe(2000);
    expect(forwardedCount() - before).toBe(t.forwarded);
    const audit = (await admin.xrange('keygate:{keystore}:audit', '-', '+')) as [string, string[]][];
    expect(audit.some(([, f]) => f[1]?.includes('"action":"credits-add"') && f[1].includes(key.apiKey))).toBe(true);
  });

  it('bad input is 400 naming the field, and changes nothing', async () => {
    const key = await createKey({ credits: { remaining: 10 } });
    const cases: [string, string, unknown, string][] = [
      ['POST', '/v1/keys', { credits: { remaining: -1 } }, 'body.credits.remaining'],
      ['POST', '/v1/keys', { credits: { remaining: 1.5 } }, 'body.credits.remaining'],
      [
        'PATCH',
        `/v1/keys/${key.apiKey}`,
        { credits: { remaining: 1, refill: { amount: 2 ** 53 + 2, interval: 'day' } } },
        'body.credits.refill.amount',
      ],
      [
        'PATCH',
        `/v1/keys/${key.apiKey}`,
        { credits: { remaining: 1, refill: { amount: 5, interval: 'week' } } },
        'body.credits.refill.interval',
      ],
      ['PUT', '/v1/owners/pool', { credits: { remaining: 'lots' } }, 'owner.credits.remaining'],
      ['POST', `/v1/keys/${key.apiKey}/credits`, { add: -5 }, 'credits.add'],
      ['POST', `/v1/keys/${key.apiKey}/credits`, { add: 0.5 }, 'credits.add'],
      ['POST', '/v1/owners/pool/credits', { add: 2 ** 53 }, 'credits.add'],
    ];
    for (const [method, path, json, field] of cases) {
      const r = await writer.call(method, path, { json });
      expect(r.status, `${method} ${path} ${JSON.stringify(json)}`).toBe(400);
      expect(r.body).toContain(field);
    }
    const shown = (await writer.call('GET', `/v1/keys/${key.apiKey}`)).json() as { credits: unknown };
    expect(shown.credits).toEqual({ remaining: 10, refill: null, nextRefillAt: null });
  });
});

describe('credits: the embedded store', { timeout: guard(120_000) }, () => {
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let manager: ManagementClient;
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    const tokens = writeTokensFile([{ name: 'billing', access: 'write' }]);
    gate = await startKeygate({
      upstream: upstream.url,
      keys: [makeKey({ apiKey: 'metered', secret: 'metered-secret-0123456789', credits: { remaining: 1000 } })],
      env: { KEYGATE_MANAGEMENT_PORT: '0', KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file },
    });
    manager = managementClient(gate.managementUrl as string, tokens.tokens.billing as string, createOpenApiCheck());
  });
  afterAll(async () => {
    await gate?.close();
    await upstream?.close();
  });

  it('of 3,000 requests at once exactly 1,000 are forwarded; a top-up over the API is 501', async () => {
    const replies = await flood([gate], [{ apiKey: 'metered', secret: 'metered-secret-0123456789' }], 3000);
    expect(tally(replies)).toEqual({ forwarded: 1000, exhausted: 2000, other: 0 });
    expect(upstream.received.length).toBe(1000);
    const top = await manager.call('POST', '/v1/keys/metered/credits', { json: { add: 5 } });
    expect(top.status).toBe(501);
    expect(top.body).toContain('credits_need_redis');
    // Nothing changed: the next request is still refused.
    const next = await send(gate.url, ACCOUNTS_PATH, {
      headers: bearer(token('metered', 'metered-secret-0123456789')),
    });
    expect(next.status).toBe(429);
  });
});
