import { Writable } from 'node:stream';
import { Cluster } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { watchFailovers } from '../../src/store/redis/connection/failover-watch.js';
import { createReplayFence, type ReplayFence } from '../../src/store/replay-fence.js';
import { client, startRedisCluster, until, type TestCluster } from '../helpers/redis-topology.js';
import { guard } from '../helpers/slowdown.js';

/**
 * The Cluster triggers of the replay fence (issue 28), each on its own against a real cluster of
 * 3 masters + 3 replicas: a MOVED redirect to the replica a planned CLUSTER FAILOVER promoted, and a
 * slot-table refresh that shows another master. The client here has no periodic slot refresh (Keygate
 * re-reads the table every 2 s, which would race the MOVED), so each trigger is the only one that
 * can have raised the fence. The reconnect (run_id) trigger is covered through Keygate in
 * test/e2e/replay-fence.test.ts.
 */
const KEY = 'failover-watch-probe';

describe('failover watch on a Redis Cluster', () => {
  let cluster: TestCluster;
  let redis: Cluster;
  let fence: ReplayFence;
  let stop: () => void;
  const causes: string[] = [];
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1 });
    redis = new Cluster([{ host: '127.0.0.1', port: cluster.ports[0]! }], {
      slotsRefreshInterval: 0,
      scaleReads: 'master',
    });
    redis.on('error', () => {});
    const sink = new Writable({
      write(chunk, _enc, cb) {
        causes.push((JSON.parse(String(chunk)) as { cause: string }).cause);
        cb();
      },
    });
    fence = createReplayFence({ clock: systemClock() });
    stop = watchFailovers(redis, fence, { logger: pino({ level: 'warn' }, sink), runIdOf: async () => '' });
    await redis.set(KEY, '1');
  }, guard(90_000));
  afterAll(async () => {
    stop?.();
    redis?.disconnect();
    await cluster?.stop();
  });

  /** The master serving `key`'s slot (CLUSTER SLOTS) and its replica (the master's INFO replication). */
  async function slotNodes(key: string): Promise<{ master: number; replica: number }> {
    const slot = await cluster.keySlot(key);
    const master = (await cluster.slotMasters(cluster.ports[0]!)).find((r) => r.from <= slot && slot <= r.to)!.port;
    const c = client(master);
    try {
      await c.connect();
      const replica = /slave0:ip=[^,]+,port=(\d+)/.exec(await c.info('replication'))?.[1];
      if (!replica) throw new Error(`master ${master} reports no replica`);
      return { master, replica: Number(replica) };
    } finally {
      c.disconnect();
    }
  }

  /**
   * A planned failover of `key`'s master to its replica; resolves once every node's CLUSTER SLOTS agrees.
   * Each case fails over another shard: a master demoted by a CLUSTER FAILOVER resyncs for a while, and a
   * second failover of the same shard on a busy machine did not always complete.
   */
  async function failOver(key: string): Promise<{ from: number; to: number }> {
    const { master, replica } = await slotNodes(key);
    const c = client(replica);
    await c.connect();
    // A manual failover needs the replica in sync: after the first one, the demoted master is still
    // resyncing as the new master's replica for a while, and a CLUSTER FAILOVER sent then gives up.
    await until(
      `replica ${replica} in sync with ${master}`,
      async () => {
        const info = await c.info('replication');
        return info.includes('master_link_status:up') && info.includes(`master_port:${master}`);
      },
      20_000,
    );
    await c.call('CLUSTER', 'FAILOVER');
    c.disconnect();
    await until(
      `replica ${replica} promoted and known to every node`,
      async () => {
        for (const port of cluster.ports) {
          const slots = await cluster.slotMasters(port);
          const slot = await cluster.keySlot(key);
          if (slots.find((r) => r.from <= slot && slot <= r.to)?.port !== replica) return false;
        }
        return true;
      },
      20_000,
    );
    return { from: master, to: replica };
  }

  it(
    'a MOVED to the promoted replica raises the fence before the command is re-sent there',
    async () => {
      expect(fence.fenceNs()).toBe(0n);
      const { from, to } = await failOver(KEY);
      expect(to).not.toBe(from);
      // Nothing has told the client yet: no refresh runs on its own, and no command went out.
      expect(fence.fenceNs()).toBe(0n);
      const before = systemClock().nowNs();
      // Sent to the old master by the stale table: MOVED, then followed to the new one.
      expect(await redis.get(KEY)).toBe('1');
      expect(fence.fenceNs()).toBeGreaterThanOrEqual(before);
      expect(causes[0]).toBe('moved');
    },
    guard(60_000),
  );

  it(
    'a slot-table refresh that shows another master raises the fence, without any command',
    async () => {
      // The MOVED's own refresh (ioredis re-reads the table after a redirect) settles first.
      await until('the slot table is re-read after the MOVED', async () => causes.includes('slots_moved'), 10_000);
      const seen = causes.length;
      const raisedAt = fence.fenceNs();
      // A key on another master: that shard fails over now.
      const first = (await slotNodes(KEY)).master;
      let other = '';
      for (let i = 0; !other; i++) if ((await slotNodes(`${KEY}-${i}`)).master !== first) other = `${KEY}-${i}`;
      await failOver(other);
      expect(fence.fenceNs()).toBe(raisedAt);
      const before = systemClock().nowNs();
      await new Promise<void>((resolve, reject) => redis.refreshSlotsCache((err) => (err ? reject(err) : resolve())));
      expect(fence.fenceNs()).toBeGreaterThanOrEqual(before);
      expect(causes.slice(seen)).toEqual(['slots_moved']);
      // Nothing moved since: another refresh leaves the fence where it is.
      const after = fence.fenceNs();
      await new Promise<void>((resolve, reject) => redis.refreshSlotsCache((err) => (err ? reject(err) : resolve())));
      expect(fence.fenceNs()).toBe(after);
    },
    guard(60_000),
  );
});
