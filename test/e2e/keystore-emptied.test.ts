import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startRedis } from '../helpers/redis-server.js';
import { client, startRedisCluster, until } from '../helpers/redis-topology.js';
import { guard } from '../helpers/slowdown.js';
import { token } from '../helpers/tokens.js';

/**
 * Issue 46, item 5: another application sharing the Redis empties it (FLUSHDB/FLUSHALL, a framework's cache
 * `clear` without a namespace). The connections and the server's run_id stay as they were, so only the
 * keystore's epoch marker (src/store/redis/connection/keystore-epoch.ts) tells. Every instance must notice: fence the
 * tokens used before (their nonces are gone), stop admitting the keys the flush removed (cached ones
 * included) so requests and listings agree, and say so in one line. Two instances, so that the one that
 * notices second, finding a marker the first already re-created, is shown to notice too.
 */
const SECRET = 'emptied-secret-0123456789abcdef';
// The widest window the default policy allows: the replays below are well inside it.
const WINDOW = { recv_window: '60' };
const LINE = 'redis keystore emptied';
const started: Array<{ close(): Promise<void> } | { stop(): Promise<void> }> = [];
let upstream: RecordingUpstream;

afterEach(async () => {
  for (const s of started.splice(0).reverse()) await ('close' in s ? s.close() : s.stop());
});
afterAll(async () => {
  await upstream?.close();
});

async function gates(env: Record<string, string>, apiKey: string): Promise<[RunningKeygate, RunningKeygate]> {
  upstream ??= await startRecordingUpstream();
  const a = await startKeygate({ upstream: upstream.url, env, keys: [makeKey({ apiKey, secret: SECRET })] });
  started.push(a);
  const b = await startKeygate({ upstream: upstream.url, env });
  started.push(b);
  return [a, b];
}

const call = async (gate: RunningKeygate, t: string) => {
  const r = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(t), timeoutMs: 5_000 });
  return { status: r.status, code: r.status === 200 ? 0 : (JSON.parse(r.body) as { code: number }).code };
};
const metric = async (gate: RunningKeygate, name: string) =>
  Number(new RegExp(`^${name} (\\S+)$`, 'm').exec((await send(gate.adminUrl, '/metrics')).body)?.[1]);
const emptiedLines = (gate: RunningKeygate) => gate.logs.filter((l) => l.includes(LINE));

/**
 * What every instance must show once the keystore it was serving from is emptied by `empty`: `used` are
 * tokens admitted before (one per instance); `apiKey` the one key, cached on every instance beforehand.
 */
async function expectNoticed(pair: readonly RunningKeygate[], apiKey: string, empty: () => Promise<void>) {
  const used = pair.map(() => token(apiKey, SECRET, WINDOW));
  for (const [i, g] of pair.entries()) expect((await call(g, used[i]!)).status).toBe(200);
  // Cached on every instance, and the replay guard works: the same token again is a replay.
  for (const [i, g] of pair.entries()) expect(await call(g, used[i]!)).toEqual({ status: 401, code: 40106 });

  await empty();
  await until('every instance noticed', async () => pair.every((g) => emptiedLines(g).length > 0), 10_000);

  // The flushed key is no longer admitted from any cache, and the listings agree: no key.
  for (const g of pair) {
    expect(await call(g, token(apiKey, SECRET, WINDOW))).toEqual({ status: 404, code: 10013 });
    expect((await g.keygate.store.listKeys({ limit: 10 })).records).toEqual([]);
  }
  // An operator restores the key: fresh tokens pass at once, the tokens used before the flush never again
  // (their nonces went with the flush: only the fence refuses them), on either instance.
  await pair[0]!.keygate.store.putKey(makeKey({ apiKey, secret: SECRET }));
  await until(
    'the restored key admitted everywhere',
    async () => {
      const fresh = await Promise.all(pair.map((g) => call(g, token(apiKey, SECRET, WINDOW))));
      return fresh.every((r) => r.status === 200);
    },
    10_000,
  );
  const replays = [];
  for (const g of pair) for (const t of used) replays.push(await call(g, t));
  expect(replays).toEqual(used.flatMap(() => pair.map(() => ({ status: 401, code: 40106 }))));
  for (const g of pair) {
    expect(emptiedLines(g)).toHaveLength(1);
    expect(await metric(g, 'keygate_redis_keystore_emptied_total')).toBe(1);
  }
}

describe.each(['FLUSHDB', 'FLUSHALL'])('a keystore emptied by another client (%s), one server', (command) => {
  it(
    'every instance fences the tokens used before, stops admitting the flushed key, and logs it once',
    async () => {
      const redis = await startRedis();
      started.push(redis);
      // The one-server defaults: KEYGATE_REPLAY_FENCE is off, and still an emptied keystore fences.
      const pair = await gates({ KEYGATE_REDIS_URL: redis.url }, 'k1');
      expect(pair.map((g) => g.config.replayFence)).toEqual([false, false]);
      await expectNoticed(pair, 'k1', async () => {
        const other = new Redis(redis.url);
        await other.call(command);
        other.disconnect();
      });
      expect(emptiedLines(pair[0]).join('')).toMatch(/replay fence raised, key caches flushed/);
    },
    guard(60_000),
  );
});

describe('a keystore emptied on a Redis Cluster', () => {
  it(
    "FLUSHALL on the master of the keystore's slot alone is noticed: the marker lives in that slot",
    async () => {
      const cluster = await startRedisCluster({ masters: 3 });
      started.push(cluster);
      const [first] = cluster.ports;
      // The keystore's master, and a key whose nonces live there too (so the flush takes them).
      const masters = await cluster.slotMasters(first!);
      const masterOf = async (name: string) => {
        const slot = await cluster.keySlot(name);
        return masters.find((m) => m.from <= slot && slot <= m.to)!.port;
      };
      const keystore = await masterOf('keygate:{keystore}:epoch');
      expect(keystore).toBe(await masterOf('keygate:{keystore}:index'));
      let apiKey = '';
      for (let i = 0; !apiKey; i++) if ((await masterOf(`keygate:{k${i}}:nonce:1`)) === keystore) apiKey = `k${i}`;

      const pair = await gates(
        {
          KEYGATE_REDIS_CLUSTER_NODES: cluster.nodes,
          // No replicas and no AOF in this cluster: what it takes to make key changes on it.
          KEYGATE_REDIS_MIN_REPLICAS: '0',
          KEYGATE_ALLOW_VOLATILE_KEY_CHANGES: 'true',
          // A starved machine can hold a Cluster command past the 500 ms default; this case is not about deadlines.
          KEYGATE_REDIS_TIMEOUT_MS: '5000',
        },
        apiKey,
      );
      await expectNoticed(pair, apiKey, async () => {
        const other = client(keystore);
        await other.connect();
        await other.flushall();
        other.disconnect();
      });
    },
    guard(90_000),
  );
});
