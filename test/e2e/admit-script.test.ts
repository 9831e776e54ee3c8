import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../../src/clock.js';
import { utcDay, USAGE_DAYS } from '../../src/keys/key-usage.js';
import { createMemoryStore } from '../../src/store/memory/memory-store.js';
import { createRedisStore } from '../../src/store/redis/redis-store.js';
import { waitStoreReady } from '../helpers/keygate.js';
import { CREDITS_LUA } from '../../src/store/redis/scripts/credits-script.js';
import { compileCredits, KEY_CREDITS_NAME, periodEndSec, periodOf } from '../../src/keys/credits.js';
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

/**
 * The credits half of the admit script: the refill periods computed in Lua (credits-script.ts) must be
 * the ones keys/credits.ts computes, at and around the day and month boundaries (the script reads
 * TIME; here the same Lua is given the times), and a balance stored in an earlier period is refilled
 * (set to the amount) by the next spend.
 */
describe('admit script: credits refill periods in Redis', () => {
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

  const boundaries = [
    '1970-01-01T00:00:00Z',
    '2024-02-29T23:59:59Z',
    '2024-03-01T00:00:00Z',
    '2026-12-31T23:59:59Z',
    '2027-01-01T00:00:00Z',
    '2027-01-31T12:00:00Z',
    '2100-02-28T23:59:59Z',
    '2100-03-01T00:00:00Z',
    '2000-02-29T00:00:00Z',
  ].map((d) => Date.parse(d) / 1000);

  it('computes the same day and month periods, and the same next refill, as Node', async () => {
    const lua = `${CREDITS_LUA}
local out = {}
for k = 1, #ARGV do
  local sec = tonumber(ARGV[k])
  local d, m = credit_period(1, sec), credit_period(2, sec)
  out[#out + 1] = d
  out[#out + 1] = credit_period_end(1, d)
  out[#out + 1] = m
  out[#out + 1] = credit_period_end(2, m)
end
return out`;
    const times = boundaries.flatMap((s) => [s - 1, s, s + 1]);
    const reply = (await admin.eval(lua, 0, ...times.map(String))) as number[];
    const expected = times.flatMap((s) => [
      periodOf(1, s),
      periodEndSec(1, periodOf(1, s)),
      periodOf(2, s),
      periodEndSec(2, periodOf(2, s)),
    ]);
    expect(reply).toEqual(expected);
    // And Node's against the calendar.
    for (const s of times) {
      const d = new Date(s * 1000);
      expect(periodOf(2, s)).toBe(d.getUTCFullYear() * 12 + d.getUTCMonth());
      expect(periodEndSec(2, periodOf(2, s)) * 1000).toBe(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1));
      expect(periodEndSec(1, periodOf(1, s)) * 1000).toBe(
        Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1),
      );
    }
  });

  it('refills (sets to the amount) a balance stored in an earlier day or month, once', async () => {
    await redis.flush();
    const store = createRedisStore({ url: redis.url }, { logger: pino({ level: 'silent' }) });
    await waitStoreReady(store);
    // The server's settings are read once after connecting; the request path waits for that reading.
    await expect
      .poll(() =>
        store.servable?.().then(
          () => true,
          () => false,
        ),
      )
      .toBe(true);
    for (const interval of ['day', 'month'] as const) {
      const spec = compileCredits(
        { remaining: 5, refill: { amount: 20, interval }, setAt: Date.now() },
        KEY_CREDITS_NAME,
      );
      const charge = { cost: 1, owner: undefined, budgets: [], credits: [{ kind: 'key' as const, spec }] };
      const apiKey = `r-${interval}`;
      expect(await store.admit(apiKey, '1', 10_000, charge)).toMatchObject({ credits: [{ remaining: 4 }] });
      const name = `keygate:{${apiKey}}:credits`;
      const p = Number(await admin.hget(name, 'p'));
      expect(p).toBe(periodOf(spec.interval, Math.floor(Date.now() / 1000)));
      // The balance as the previous period left it: the next spend starts from the refill's amount.
      await admin.hset(name, 'p', String(p - 1), 'r', '2');
      expect(await store.admit(apiKey, '2', 10_000, charge)).toMatchObject({ credits: [{ remaining: 19 }] });
      expect(await store.admit(apiKey, '3', 10_000, charge)).toMatchObject({ credits: [{ remaining: 18 }] });
    }
    await store.close();
  });
});
