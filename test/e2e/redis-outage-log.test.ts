import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { createRedisOwners } from '../../src/store/redis/redis-owners.js';
import { createRedisStore } from '../../src/store/redis/redis-store.js';
import { waitStoreReady } from '../../src/store/wait-ready.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { guard } from '../helpers/slowdown.js';

/**
 * Issue 35 item 5: a Redis outage used to flood the log (a warning per failed reconnect, per connection:
 * ≈4 a second) and say nothing when Redis was back. A real redis-server is killed and restarted under a
 * store whose outage interval is 1 s: per connection, one "down" line, at most one "still down" line per
 * interval of the measured outage, and one "redis reconnected".
 */
const INTERVAL_MS = 1_000;

describe('Redis outage log', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis({ persistence: 'none' }); // our own process: we kill it
  });
  afterAll(() => redis?.stop());

  it('one line when a connection goes down, one per interval while down, one "redis reconnected"', async () => {
    const lines: Array<{ msg: string; conn?: string; level: number; [k: string]: unknown }> = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l));
        cb();
      },
    });
    const store = createRedisStore(
      { url: redis.url, commandTimeoutMs: 300, outageLogMs: INTERVAL_MS },
      { logger: pino({ level: 'info' }, sink) },
    );
    let errors = 0;
    store.client.on('error', () => errors++);
    try {
      await waitStoreReady(store);
      const of = (msg: string, conn: string) => lines.filter((l) => l.msg === msg && l.conn === conn);
      const conns = ['client', 'subscriber', 'management'];

      await redis.kill();
      const killed = performance.now();
      // Down for a few intervals: each connection keeps failing its reconnects (every 0.5 s at most).
      await expect
        .poll(() => conns.every((c) => of('redis still down', c).length >= 2), {
          timeout: guard(10 * INTERVAL_MS),
          interval: 50,
        })
        .toBe(true);
      const downMs = performance.now() - killed;
      for (const conn of conns) {
        expect(of('redis connection down', conn), conn).toHaveLength(1);
        expect(of('redis connection down', conn)[0]!.level).toBe(40);
        const still = of('redis still down', conn);
        // At most one per interval of the outage as measured (the first one an interval after the down line).
        expect(still.length, conn).toBeLessThanOrEqual(Math.floor(downMs / INTERVAL_MS));
        for (const l of still)
          expect(l).toMatchObject({ level: 40, downForMs: expect.any(Number), failures: expect.any(Number) });
        expect(of('redis reconnected', conn)).toHaveLength(0);
      }
      const outageLines = lines.length;
      console.log(
        `[redis-faults] outage of ${Math.round(downMs)} ms: ${errors} connection errors on the command connection alone, ${outageLines} log lines for all three connections`,
      );

      await redis.start();
      await expect
        .poll(() => conns.every((c) => of('redis reconnected', c).length === 1), {
          timeout: guard(10_000),
          interval: 50,
        })
        .toBe(true);
      for (const conn of conns)
        expect(of('redis reconnected', conn)[0]).toMatchObject({ level: 30, downForMs: expect.any(Number) });
      await store.ping();
      // Back and quiet: no further outage line, and closing the store is not an outage either.
      const settled = lines.length;
      await store.close();
      expect(lines.slice(settled).filter((l) => /redis (connection down|still down)/.test(l.msg))).toEqual([]);
    } finally {
      await store.close().catch(() => {});
    }
  });

  /**
   * The owners' limits table is re-read after a failed read every 100 ms, doubling to 2 s: with Redis away that was
   * a warning per retry, each with the same client error (22 lines in 12 s). Folded into an outage summary: one
   * line when the reads start failing, one per interval while they do, one when a read succeeds again.
   */
  it('the owner-limit retries: one line when they start failing, one per interval, one when a read succeeds', async () => {
    const lines: Array<{ msg: string; level: number; [k: string]: unknown }> = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l));
        cb();
      },
    });
    const store = createRedisStore({ url: redis.url, commandTimeoutMs: 300 }, { logger: pino({ level: 'silent' }) });
    const owners = createRedisOwners(
      { prefix: 'outage-test:', channel: 'outage-test:changes', outageLogMs: INTERVAL_MS },
      { client: store.client, manager: store.client, logger: pino({ level: 'info' }, sink), clock: systemClock() },
    );
    try {
      await waitStoreReady(store);
      await owners.ensureLoaded();
      const ownerLines = () => lines.filter((l) => /^owner limits/.test(l.msg));
      const of = (prefix: string) => ownerLines().filter((l) => l.msg.startsWith(prefix));

      await redis.kill();
      const killed = performance.now();
      owners.changed(null); // what a feed flush does: the whole table is read again, and retried
      await expect
        .poll(() => of('owner limits still unread').length >= 2, { timeout: guard(10 * INTERVAL_MS), interval: 50 })
        .toBe(true);
      const downMs = performance.now() - killed;
      expect(of('owner limits could not be read')).toHaveLength(1);
      expect(of('owner limits could not be read')[0]).toMatchObject({ level: 40, err: expect.any(String) });
      const still = of('owner limits still unread');
      expect(still.length).toBeLessThanOrEqual(Math.floor(downMs / INTERVAL_MS));
      for (const l of still)
        expect(l).toMatchObject({ level: 40, downForMs: expect.any(Number), failures: expect.any(Number) });
      expect(() => owners.limit('anyone')).toThrow(); // meanwhile owners' keys are answered 503
      console.log(`[redis-faults] owner limits unread for ${Math.round(downMs)} ms: ${ownerLines().length} log lines`);

      await redis.start();
      await expect.poll(() => of('owner limits read again').length, { timeout: guard(10_000), interval: 50 }).toBe(1);
      expect(of('owner limits read again')[0]).toMatchObject({ level: 30, downForMs: expect.any(Number) });
      expect(owners.limit('anyone')).toBeUndefined();
    } finally {
      owners.stop();
      await store.close().catch(() => {});
    }
  });
});
