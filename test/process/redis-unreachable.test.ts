import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEARTBEAT_MISSES, HEARTBEAT_MS } from '../../src/store/redis/connection/subscriber-heartbeat.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { serveKeygate, type ServedKeygate } from '../helpers/spawn-keygate.js';
import { guard } from '../helpers/slowdown.js';

/**
 * Issue 41 item 1: a Keygate started against a Redis it cannot reach used to log `keygate started`,
 * then only a heartbeat warning about key caches every 3 s. Now: one line naming the Redis (password
 * masked) and the cause as soon as the first attempt fails, /readyz 503 redis_unreachable with the
 * cause, no heartbeat warning while the connection itself is down. Item 2: once Redis answers, an
 * empty store is ready (and said once in the log).
 */
const PASSWORD = 'hunter2-not-for-logs';
const STARTED_WITHIN_MS = 2_000; // the bound: the first attempt fails at once for these causes
const UNREACHABLE = (l: Record<string, unknown>) => String(l.msg).startsWith('redis unreachable at ');
const HEARTBEAT_WARNING = 'change messages not heard on the subscriber: key caches flushed, subscriber moved';

const readyz = async (s: ServedKeygate) => {
  const r = await fetch(`${s.adminUrl}/readyz`);
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
};

/** The unreachable line, checked: written within 2 s of the process's first line, naming the Redis and the cause. */
async function unreachableLine(s: ServedKeygate, redis: string, cause: string) {
  const line = await s.line(UNREACHABLE);
  const first = s.lines()[0]!;
  expect(Number(line.time) - Number(first.time)).toBeLessThanOrEqual(STARTED_WITHIN_MS);
  expect(line).toMatchObject({ level: 50, redis, cause });
  expect(String(line.msg)).toContain(redis);
  expect(s.lines().filter(UNREACHABLE)).toHaveLength(1);
  expect(s.output()).not.toContain(PASSWORD);
  return line;
}

describe('an unreachable Redis at start (real serve process)', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis(); // our own: killed and restarted below
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('refused: one line with the cause, /readyz names it, no heartbeat warning while down; ready on an empty store once it is up', async () => {
    await redis.kill();
    const url = `redis://:${PASSWORD}@127.0.0.1:${redis.port}`;
    const s = await serveKeygate({ KEYGATE_UPSTREAM: 'http://127.0.0.1:9', KEYGATE_REDIS_URL: url });
    try {
      await unreachableLine(s, `redis://:***@127.0.0.1:${redis.port}`, 'refused');
      expect(await readyz(s)).toEqual({
        status: 503,
        body: {
          status: 'not ready',
          reason: 'redis_unreachable',
          cause: 'refused',
          err: `connect ECONNREFUSED 127.0.0.1:${redis.port}`,
        },
      });
      // Past the heartbeat's own window (misses × interval) and one more interval: the warning that used
      // to repeat every 3 s blamed the subscriber for what the line above says.
      await new Promise((r) => setTimeout(r, (HEARTBEAT_MISSES + 2) * HEARTBEAT_MS));
      expect(s.lines().filter((l) => l.msg === HEARTBEAT_WARNING)).toEqual([]);

      await redis.start();
      await expect
        .poll(() => readyz(s), { timeout: guard(10_000), interval: 100 })
        .toEqual({
          status: 200,
          body: { status: 'ready' },
        });
      const empty = await s.line((l) => String(l.msg).includes('holds no keys'));
      expect(empty).toMatchObject({ level: 40, keys: 0, readyRequiresKeys: false });
      await s.line('redis reconnected');
    } finally {
      await s.stop();
    }
  });

  it.each([
    {
      name: 'dns',
      url: 'redis://keygate-no-such-host.invalid:6379',
      shown: 'redis://keygate-no-such-host.invalid:6379',
    },
  ])('$name: one line with the cause, /readyz names it', async ({ name, url, shown }) => {
    const s = await serveKeygate({ KEYGATE_UPSTREAM: 'http://127.0.0.1:9', KEYGATE_REDIS_URL: url });
    try {
      await unreachableLine(s, shown, name);
      expect(await readyz(s)).toMatchObject({ status: 503, body: { reason: 'redis_unreachable', cause: name } });
    } finally {
      await s.stop();
    }
  });

  it('auth: a wrong password is named as such, the password never shown', async () => {
    const admin = new Redis(redis.url);
    await admin.config('SET', 'requirepass', 'the-right-one-0123');
    admin.disconnect();
    const s = await serveKeygate({
      KEYGATE_UPSTREAM: 'http://127.0.0.1:9',
      KEYGATE_REDIS_URL: `redis://:${PASSWORD}@127.0.0.1:${redis.port}`,
    });
    try {
      const line = await unreachableLine(s, `redis://:***@127.0.0.1:${redis.port}`, 'auth');
      expect(String(line.err)).toMatch(/^WRONGPASS/);
      expect(await readyz(s)).toMatchObject({ status: 503, body: { reason: 'redis_unreachable', cause: 'auth' } });
    } finally {
      await s.stop();
      const c = new Redis(redis.url, { password: 'the-right-one-0123' });
      await c.config('SET', 'requirepass', '');
      c.disconnect();
    }
  });

  it('KEYGATE_READY_REQUIRES_KEYS=true keeps the guard: 503 no_keys on an empty store, and says so at start', async () => {
    await redis.flush();
    const s = await serveKeygate({
      KEYGATE_UPSTREAM: 'http://127.0.0.1:9',
      KEYGATE_REDIS_URL: redis.url,
      KEYGATE_READY_REQUIRES_KEYS: 'true',
    });
    try {
      const warned = await s.line((l) => String(l.msg).includes('holds no keys'));
      expect(warned).toMatchObject({ level: 40, readyRequiresKeys: true });
      expect(await readyz(s)).toEqual({ status: 503, body: { status: 'not ready', reason: 'no_keys' } });
    } finally {
      await s.stop();
    }
  });
});
