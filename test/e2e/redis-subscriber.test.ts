import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createKeyOperations } from '../../src/operations/key-operations.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { token } from '../helpers/tokens.js';

/**
 * Issue 27: subscribed means subscribed. A Keygate started while its Redis is down used to give
 * up on SUBSCRIBE at once and never hear a change; its subscriber metric read 1 anyway. Here
 * `keygate_redis_up{connection="subscriber"}` must follow what Redis itself reports (PUBSUB NUMSUB),
 * and a revocation made through a second instance must stop the key within 1 s.
 */
describe('subscriber: a Keygate started before its Redis subscribes once Redis is up', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  const gates: RunningKeygate[] = [];
  afterAll(async () => {
    for (const g of gates) await g.close();
    await upstream?.close();
    await redis?.stop();
  });

  const subscriberUp = async (g: RunningKeygate) =>
    (await g.keygate.metrics.redisUp.get()).values.find((v) => v.labels.connection === 'subscriber')?.value ?? 0;
  const numsub = async () => {
    const c = new Redis(redis.url);
    try {
      const [, n] = (await c.pubsub('NUMSUB', 'keygate:key-events')) as [string, number];
      return Number(n);
    } finally {
      c.disconnect();
    }
  };

  it('revoked through a second instance: 404 10013 within 1 s; the metric tracks PUBSUB NUMSUB', async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    await redis.kill();
    // A long cache TTL: only the change message (or the unsubscribed bound) can end a cached key.
    const env = { KEYGATE_KEY_CACHE_TTL_MS: '600000' };
    const starting = startKeygate({ upstream: upstream.url, redisUrl: redis.url, env });
    // Let the first connection attempts (and the old code's one SUBSCRIBE) fail.
    await new Promise((r) => setTimeout(r, 800));
    await redis.start();
    const a = await starting;
    gates.push(a);
    const b = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env });
    gates.push(b);

    await expect.poll(numsub, { timeout: 5_000 }).toBe(2);
    await expect.poll(() => subscriberUp(a), { timeout: 5_000 }).toBe(1);

    const key = makeKey({ apiKey: 'kg_sub', secret: 'secret-for-subscriber-test-0123' });
    await b.keygate.store.putKey(key);
    const call = () => send(a.url, ACCOUNTS_PATH, { headers: bearer(token(key.apiKey, key.secret as string)) });
    await expect.poll(async () => (await call()).status, { timeout: 3_000 }).toBe(200);

    const ops = createKeyOperations({ store: b.keygate.store, now: () => Date.now(), audit: () => {} });
    const started = Date.now();
    expect((await ops.revoke(key.apiKey, 'leaked', 'test')).ok).toBe(true);
    let answer = await call();
    while (answer.status === 200 && Date.now() - started < 1_000) answer = await call();
    console.log(
      `[redis-subscriber] revocation seen by the instance started before Redis after ${Date.now() - started} ms`,
    );
    expect(answer.status).toBe(404);
    expect((answer.json() as { code: number }).code).toBe(10013);

    // Redis restarted: the metric drops with the subscription and comes back with it.
    await redis.kill();
    await expect.poll(() => subscriberUp(a), { timeout: 5_000 }).toBe(0);
    await redis.start();
    await expect.poll(numsub, { timeout: 10_000 }).toBe(2);
    await expect.poll(() => subscriberUp(a), { timeout: 5_000 }).toBe(1);
  });
});
