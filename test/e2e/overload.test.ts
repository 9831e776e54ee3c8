import { spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { createRedisStore } from '../../src/store/redis/redis-store.js';
import type { Store } from '../../src/store/store.js';
import { KEYS, SECRET, startFixture } from '../helpers/adversarial.js';
import { parseExposition, valueOf } from '../helpers/exposition.js';
import { startKeygate, waitStoreReady } from '../helpers/keygate.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { token } from '../helpers/tokens.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';
import { exchange, firstBody } from '../helpers/raw-socket.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

/** Blocks this process's event loop, as a CPU-saturated Keygate would be. */
function busy(ms: number) {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // spin
  }
}

const get = () =>
  `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token('good', SECRET)}\r\nConnection: close\r\n\r\n`;

describe('overload: a healthy Redis is never reported down', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(() => redis.stop());

  /**
   * `blockMs` after the first nonce command was written (the reply waits unread), or, with `beforeWrite`,
   * in the very turn that made it: the command leaves only at the end of that turn, as behind a poll phase
   * full of fast refusals past KEYGATE_MAX_IN_FLIGHT. Then `beforeWrite.redisAnswersAfterMs` after the
   * block, Redis (paused meanwhile) answers: within its deadline of the command being sent.
   */
  async function gateWithBlockingStore(
    blockMs: number,
    beforeWrite?: { redisPid: number; redisAnswersAfterMs: number },
  ) {
    const upstream = await startRecordingUpstream();
    const config = loadConfig({ KEYGATE_UPSTREAM: upstream.url, KEYGATE_REDIS_URL: redis.url });
    const inner = createRedisStore(
      { connection: config.redis!, commandTimeoutMs: 300 },
      { logger: pino({ level: 'silent' }) },
    );
    await waitStoreReady(inner);
    let blocked = 0;
    // After the first replay-guard command is written (ioredis flushes its pipeline on
    // nextTick), block the loop for longer than the deadline: Redis answers at once, but
    // Keygate reads the answers (of every command already written) only after the deadline.
    const store: Store = Object.assign(Object.create(inner) as Store, {
      admit: (...args: Parameters<Store['admit']>) => {
        const p = inner.admit(...args);
        if (beforeWrite !== undefined && blocked === 0) {
          blocked++;
          redis.pause();
          // Thawed by another process: this one is busy. `sleep` starts now, so Redis answers at most
          // redisAnswersAfterMs after the block ends (earlier if the shell starts late).
          const thawAfterS = (blockMs + beforeWrite.redisAnswersAfterMs) / 1000;
          spawn('sh', ['-c', `sleep ${thawAfterS}; kill -CONT ${beforeWrite.redisPid}`], { stdio: 'ignore' });
          busy(blockMs);
          return p;
        }
        if (blockMs > 0 && blocked === 0)
          setImmediate(() => {
            blocked++;
            busy(blockMs);
          });
        return p;
      },
    });
    const gate = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      store,
      keys: KEYS,
      env: { KEYGATE_REDIS_TIMEOUT_MS: '300' },
    });
    for (const k of KEYS) await inner.putKey(k);
    return {
      gate,
      blocked: () => blocked,
      close: async () => {
        await gate.close();
        await upstream.close();
      },
    };
  }

  it('loop blocked 3x the Redis deadline while Redis answers at once: every request 200, no store_unavailable', async () => {
    const g = await gateWithBlockingStore(900);
    try {
      const answers = await Promise.all(
        Array.from({ length: 6 }, () => exchange(g.gate.port, get(), { quietMs: 5_000, maxMs: 20_000 })),
      );
      expect(g.blocked()).toBeGreaterThan(0);
      expect(answers.map((a) => a.statuses[0])).toEqual(Array(6).fill(200));
      const metrics = parseExposition(await g.gate.keygate.metrics.registry.metrics());
      expect(valueOf(metrics, 'keygate_auth_rejections_total', { code: '50300', reason: 'store_unavailable' })).toBe(0);
      expect(valueOf(metrics, 'keygate_redis_errors_total', { kind: 'timeout' })).toBe(0);
    } finally {
      await g.close();
    }
  });

  it('loop blocked 3x the deadline before the command is even written (refusals filling the turn), Redis answers 100 ms after it: 200', async () => {
    const info = new Redis(redis.url);
    const redisPid = Number(/process_id:(\d+)/.exec(await info.info('server'))?.[1]);
    info.disconnect();
    // A 300 ms deadline (gateWithBlockingStore); the turn that asks lasts 900 ms; Redis answers 100 ms after it.
    const g = await gateWithBlockingStore(900, { redisPid, redisAnswersAfterMs: 100 });
    try {
      const r = await exchange(g.gate.port, get(), { quietMs: 5_000, maxMs: 20_000 });
      expect(g.blocked()).toBe(1);
      expect(r.statuses).toEqual([200]);
      const metrics = parseExposition(await g.gate.keygate.metrics.registry.metrics());
      expect(valueOf(metrics, 'keygate_auth_rejections_total', { code: '50300', reason: 'store_unavailable' })).toBe(0);
      expect(valueOf(metrics, 'keygate_redis_errors_total', { kind: 'timeout' })).toBe(0);
    } finally {
      redis.resume();
      await g.close();
    }
  });

  it('a Redis that truly stalls (SIGSTOP) still fails closed within the deadline: 503 store_unavailable', async () => {
    const g = await gateWithBlockingStore(0);
    try {
      expect((await exchange(g.gate.port, get(), { quietMs: 3_000 })).statuses).toEqual([200]);
      redis.pause();
      const r = await exchange(g.gate.port, get(), { quietMs: 3_000 });
      redis.resume();
      expect(r.statuses).toEqual([503]);
      expect(firstBody(r.text)).toEqual({ code: 50300, message: 'Service unavailable' });
      // 300 ms deadline, plus one loop turn and a loaded machine's slack.
      expect(r.ms).toBeLessThan(1_500);
    } finally {
      redis.resume();
      await g.close();
    }
  });
});

describe('overload: admission control', () => {
  it('past KEYGATE_MAX_IN_FLIGHT a request is shed at once (503 50300 overloaded, Retry-After); after the load, requests pass', async () => {
    const f = await startFixture({ env: { KEYGATE_MAX_IN_FLIGHT: '4' } });
    const release: Array<() => void> = [];
    f.upstream.handler = (req, res) => {
      req.resume();
      release.push(() => res.end('late'));
    };
    try {
      const held = Array.from({ length: 4 }, () =>
        exchange(f.gate.port, `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\n${f.auth()}Connection: close\r\n\r\n`, {
          quietMs: 5_000,
        }),
      );
      while (release.length < 4) await new Promise((r) => setTimeout(r, 10));
      const shed = await exchange(
        f.gate.port,
        `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\n${f.auth()}Connection: close\r\n\r\n`,
        { quietMs: 2_000 },
      );
      expect(shed.statuses).toEqual([503]);
      expect(firstBody(shed.text)).toEqual({ code: 50300, message: 'Service unavailable' });
      expect(shed.text.toLowerCase()).toContain('retry-after:');
      // "At once" is shown by the answer itself: the four requests it could queue behind are held until the release
      // below, so a queued request could not have been answered yet. The time is printed, not bounded.
      console.log(`[overload] shed in ${Math.round(shed.ms)} ms`);
      expect(release).toHaveLength(4);
      expect(f.upstream.received).toHaveLength(4);
      for (const r of release) r();
      for (const r of await Promise.all(held)) expect(r.statuses).toEqual([200]);
      f.upstream.handler = undefined;
      const after = await exchange(
        f.gate.port,
        `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\n${f.auth()}Connection: close\r\n\r\n`,
        { quietMs: 2_000 },
      );
      expect(after.statuses).toEqual([200]);
      const metrics = parseExposition(await (await fetch(`${f.gate.adminUrl}/metrics`)).text());
      expect(valueOf(metrics, 'keygate_auth_rejections_total', { code: '50300', reason: 'overloaded' })).toBe(1);
    } finally {
      await f.close();
    }
  });
});
