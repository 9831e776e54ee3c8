import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../../src/clock.js';
import { utcDay, USAGE_DAYS } from '../../src/keys/key-usage.js';
import { createMemoryStore } from '../../src/store/memory/memory-store.js';
import { createRedisStore } from '../../src/store/redis/redis-store.js';
import { waitStoreReady } from '../helpers/keygate.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';

const DAY = 86_400_000;

/**
 * The usage half of the admit script: its UTC day (computed in Lua from Redis's
 * TIME) must be the day Node computes, and the days kept must be the last
 * USAGE_DAYS. The memory store keeps the same days on an injected clock.
 */
describe('admit script: usage days in Redis', () => {
  let redis: TestRedis;
  let admin: Redis;
  beforeAll(async () => {
    redis = await startRedis({ shared: true });
    admin = new Redis(redis.url);
  });
  afterAll(async () => {
    admin?.disconnect();
    await redis?.stop();
  });

  it("counts today under Node's UTC date and drops days older than the kept range on a day's first request", async () => {
    await redis.flush();
    const store = createRedisStore({ url: redis.url }, { logger: pino({ level: 'silent' }) });
    await waitStoreReady(store);
    const now = Date.now();
    const kept = utcDay(now - (USAGE_DAYS - 1) * DAY);
    const dropped = utcDay(now - USAGE_DAYS * DAY);
    await admin.hset('keygate:{d}:usage', dropped, '7', kept, '4', '1999-12-31', '1', 'last', '1');
    expect((await store.admit('d', '1', 10_000, undefined)).outcome).toBe('admitted');
    expect((await store.admit('d', '2', 10_000, undefined)).outcome).toBe('admitted');
    const usage = await store.getUsage('d');
    const today = utcDay(Date.now());
    expect(usage.perDay).toEqual({ [kept]: 4, [today]: 2 });
    expect(usage.lastUsedAtMs).toBeGreaterThan(now - 5_000);
    await store.close();
  });
});

describe('memory store: usage days', () => {
  it('keeps the last USAGE_DAYS days, today included', async () => {
    const start = Date.parse('2026-01-01T12:00:00Z');
    const clock = manualClock(start);
    const store = createMemoryStore({}, { clock });
    let n = 0;
    const use = async (times: number) => {
      for (let i = 0; i < times; i++) await store.admit('k', String(n++), 10_000, undefined);
    };
    await use(3); // 2026-01-01
    clock.advance(DAY);
    await use(1); // 2026-01-02
    clock.advance((USAGE_DAYS - 1) * DAY); // 2026-02-05: 2026-01-01 is now 35 days back, out of range
    await use(2);
    expect(await store.getUsage('k')).toEqual({
      lastUsedAtMs: clock.nowMs(),
      perDay: { '2026-01-02': 1, '2026-02-05': 2 },
    });
    await store.close();
  });
});
