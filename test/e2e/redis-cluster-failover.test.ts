import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import {
  client,
  CLUSTER_NODE_TIMEOUT_MS,
  startRedisCluster,
  until,
  type TestCluster,
} from '../helpers/redis-topology.js';
import { managementClient, writeTokensFile } from '../helpers/management.js';
import { token } from '../helpers/tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { ACCOUNTS_PATH, LONG_CACHE_TTL_MS } from '../helpers/constants.js';
import { CONNECT_TIMEOUT_MS, SLOTS_REFRESH_MS } from '../../src/store/redis/connection/redis-connection.js';
import { HEARTBEAT_MISSES, HEARTBEAT_MS } from '../../src/store/redis/connection/subscriber-heartbeat.js';

/**
 * Issue 28 item 4: a Cluster master that hangs (SIGSTOP: frozen, swapping, a partition that drops
 * packets) closes no connection. The cluster promotes its replica after cluster-node-timeout, but
 * before this change Keygate kept sending that slot range to the frozen node (503 until it resumed)
 * and a subscriber on a frozen node heard no key change while its cache kept the key.
 * 3 masters + 3 replicas, real redis-server processes on free ports.
 */
const SECRET = 'cluster-hang-secret-0123456789ab';
const PASSWORD = 'cluster-hang-pass-0123';
const WINDOW = { recv_window: '60' };

describe('Redis Cluster (3 masters, 3 replicas): a node that hangs', () => {
  let cluster: TestCluster;
  let upstream: RecordingUpstream;
  const started: RunningKeygate[] = [];
  const env = (extra: Record<string, string> = {}) => ({
    KEYGATE_REDIS_CLUSTER_NODES: cluster.nodes,
    KEYGATE_REDIS_PASSWORD: PASSWORD,
    KEYGATE_KEY_CACHE_TTL_MS: String(LONG_CACHE_TTL_MS),
    KEYGATE_LOG_LEVEL: 'warn',
    ...extra,
  });
  const start = async (extra: Record<string, string> = {}, keys: string[] = []) => {
    const g = await startKeygate({
      upstream: upstream.url,
      env: env(extra),
      keys: keys.map((apiKey) => makeKey({ apiKey, secret: SECRET })),
    });
    started.push(g);
    return g;
  };
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1, password: PASSWORD });
    upstream = await startRecordingUpstream();
  }, 90_000);
  afterAll(async () => {
    for (const g of started) await g.close();
    await upstream?.close();
    await cluster?.stop();
  });

  const call = (g: RunningKeygate, t: string) => send(g.url, ACCOUNTS_PATH, { headers: bearer(t), timeoutMs: 10_000 });
  const masterOf = async (slot: number, askPort: number) =>
    (await cluster.slotMasters(askPort)).find((r) => r.from <= slot && slot <= r.to)?.port;
  const clusterOk = async (port: number) => {
    const c = client(port, PASSWORD);
    try {
      await c.connect();
      return String(await c.call('CLUSTER', 'INFO')).includes('cluster_state:ok');
    } finally {
      c.disconnect();
    }
  };
  /** A key name whose {apiKey} slot is served by a master in `on` (and not by any in `notOn`). */
  const keyOn = async (prefix: string, askPort: number, accept: (master: number) => boolean) => {
    for (let i = 0; i < 200; i++) {
      const name = `${prefix}-${i}`;
      if (accept((await masterOf(await cluster.keySlot(name), askPort))!)) return name;
    }
    throw new Error('no key name found for that master');
  };
  /** A replica whose link to its master is up and not resyncing (a master counts as in sync). */
  const replicaInSync = async (port: number) => {
    const c = client(port, PASSWORD);
    try {
      await c.connect();
      const info = await c.info('replication');
      return (
        info.includes('role:master') ||
        (info.includes('master_link_status:up') && info.includes('master_sync_in_progress:0'))
      );
    } finally {
      c.disconnect();
    }
  };
  /**
   * Every node in sync again: a thawed master has rejoined as a replica and finished its resync. Until it has,
   * it cannot be promoted, so freezing its master would take the whole cluster down (CLUSTERDOWN, 503 for every
   * key) instead of failing over: the next case froze such a master once and waited in vain for the promotion.
   */
  const healthy = () =>
    until(
      'every node reports cluster_state:ok and every replica is in sync',
      async () =>
        (await Promise.all(cluster.ports.map(clusterOk))).every(Boolean) &&
        (await Promise.all(cluster.ports.map(replicaInSync))).every(Boolean),
      30_000,
    );

  it('a frozen master: its slot range is served again within a bound after cluster_state:ok, and no token admitted before is admitted again', async () => {
    const keystoreSlot = await cluster.keySlot('keystore');
    const keystoreMaster = (await masterOf(keystoreSlot, cluster.ports[0]!))!;
    // The frozen master serves the key's slots but not the key records (the cache holds them anyway).
    const frozen = cluster.masterPorts.find((p) => p !== keystoreMaster)!;
    const ask = cluster.ports.find((p) => p !== frozen)!;
    const apiKey = await keyOn('hang', ask, (m) => m === frozen);
    const fenced = await start({}, [apiKey]);
    const open = await start({ KEYGATE_REPLAY_FENCE: 'off' });
    const gates = [fenced, open];
    const admitted: string[] = [];
    // Ten admitted tokens, before anything is frozen. On a starved machine a command can miss its 500 ms deadline
    // even now: that is an honest 503 (fail closed), and the token is simply not one of the ten.
    const before: number[] = [];
    await until(
      'ten tokens admitted before the freeze',
      async () => {
        const t = token(apiKey, SECRET, WINDOW);
        const st = (await call(gates[admitted.length % 2]!, t)).status;
        before.push(st);
        if (st === 200) admitted.push(t);
        return admitted.length === 10;
      },
      30_000,
    );
    expect(before.filter((st) => st !== 200 && st !== 503)).toEqual([]);

    let running = true;
    const samples: Array<{ at: number; via: number; status: number; fenced: boolean }> = [];
    const loop = async (via: number) => {
      while (running) {
        const at = Date.now();
        const r = await call(gates[via]!, token(apiKey, SECRET, WINDOW)).catch(() => undefined);
        samples.push({
          at,
          via,
          status: r?.status ?? 0,
          fenced: r?.status === 401 && r.headers['x-server-time'] !== undefined,
        });
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    const loops = [loop(0), loop(1)];
    await new Promise((r) => setTimeout(r, 300));
    const frozenAt = Date.now();
    cluster.freeze(frozen);
    let okAt = 0;
    try {
      await until(
        'the cluster promotes the frozen master’s replica (cluster_state:ok, the slot on another node)',
        async () => (await masterOf(await cluster.keySlot(apiKey), ask)) !== frozen && (await clusterOk(ask)),
        30_000,
      );
      okAt = Date.now();
      // Keygate re-reads the slot table after a command timeout (and every SLOTS_REFRESH_MS); a refresh
      // that asks the frozen node first waits CONNECT_TIMEOUT_MS before the next node, and one may be
      // under way when the cluster switches: two such waits, one command deadline, one period.
      const bound = 2 * CONNECT_TIMEOUT_MS + fenced.config.limits.redisCommandTimeoutMs + SLOTS_REFRESH_MS + 1_000;
      await until(
        'both instances serve the slot range again',
        async () => [0, 1].every((via) => samples.some((s) => s.via === via && s.at > okAt && s.status === 200)),
        bound + 20_000,
      );
      const servedAfterMs = [0, 1].map(
        (via) => samples.find((s) => s.via === via && s.at > okAt && s.status === 200)!.at - okAt,
      );
      running = false;
      await Promise.all(loops);
      const during = samples.filter((s) => s.at >= frozenAt);
      const report = {
        promotedAfterMs: okAt - frozenAt,
        servedAfterOkMs: servedAfterMs,
        boundMs: bound,
        requests: during.length,
        unavailable: during.filter((s) => s.status === 503).length,
        fencedFreshTokens: during.filter((s) => s.fenced).length,
      };
      console.log(`[cluster-hang] ${JSON.stringify(report)}`);
      for (const ms of servedAfterMs) expect(ms).toBeLessThanOrEqual(bound);
      // Fail closed throughout: 200, 503 or a fenced refusal (a token signed just before the switch).
      expect(during.filter((s) => s.status !== 200 && s.status !== 503 && !s.fenced)).toEqual([]);

      // The fence: drop the admitted nonces from the promoted master, as if they had not reached the
      // replica before the failover (a Cluster replica that lags is not injectable here: no relay).
      const promoted = (await masterOf(await cluster.keySlot(apiKey), ask))!;
      const c = client(promoted, PASSWORD);
      await c.connect();
      const nonces = await c.keys(`keygate:{${apiKey}}:nonce:*`);
      expect(nonces.length).toBeGreaterThanOrEqual(admitted.length);
      await c.del(...nonces);
      c.disconnect();
      const again = { fenced: 0, open: 0 };
      for (const t of admitted) if ((await call(fenced, t)).status === 200) again.fenced++;
      for (const t of admitted) if ((await call(open, t)).status === 200) again.open++;
      console.log(
        `[cluster-hang] tokens admitted before the freeze, nonces lost, admitted again: ${JSON.stringify(again)}`,
      );
      expect(again).toEqual({ fenced: 0, open: admitted.length });
      expect(fenced.logs.some((l) => l.includes('replay fence raised'))).toBe(true);
    } finally {
      running = false;
      await Promise.all(loops);
      cluster.thaw(frozen);
    }
    await healthy();
  }, 120_000);

  it("the subscriber's node frozen: a revocation made while it hangs takes effect within a bound", async () => {
    for (const g of started.splice(0)) await g.close();
    console.log('[cluster-hang] closed the first instances');
    await healthy();
    const keystoreMaster = (await masterOf(await cluster.keySlot('keystore'), cluster.ports[0]!))!;
    const numsub = async (port: number) => {
      const c = client(port, PASSWORD);
      try {
        await c.connect();
        return Number(((await c.call('PUBSUB', 'NUMSUB', 'keygate:key-events')) as [string, number])[1]);
      } finally {
        c.disconnect();
      }
    };
    // One instance; its subscriber on any node but the key records' master (whose freeze would
    // hold the revocation itself until the failover).
    let gate: RunningKeygate | undefined;
    let subscriberNode = 0;
    for (let attempt = 0; attempt < 8 && !subscriberNode; attempt++) {
      const g = await start({}, []);
      await until('the instance subscribes', async () => g.keygate.store.subscribed(), 10_000);
      const counts = await Promise.all(cluster.ports.map(numsub));
      const node = cluster.ports[counts.findIndex((n) => n > 0)]!;
      if (node !== keystoreMaster) [gate, subscriberNode] = [g, node];
      else await started.splice(started.indexOf(g), 1)[0]!.close();
    }
    expect(subscriberNode).toBeGreaterThan(0);
    console.log(`[cluster-hang] subscriber on ${subscriberNode}`);
    const ask = cluster.ports.find((p) => p !== subscriberNode)!;
    const apiKey = await keyOn('watched', ask, (m) => m !== subscriberNode);
    await gate!.keygate.store.putKey(makeKey({ apiKey, secret: SECRET }));
    await until('the key is served', async () => (await call(gate!, token(apiKey, SECRET))).status === 200, 10_000);

    // The revocation goes through a second instance's management API: its connections are warm
    // and on the key records' master, so the change is made while the subscriber's node hangs.
    const tokens = writeTokensFile([{ name: 'ops', access: 'write' }]);
    const ops = await start({
      KEYGATE_MANAGEMENT_PORT: '0',
      KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file,
      // Durability needs a replica of the key records' master; the frozen node may be it: propagation only.
      KEYGATE_REDIS_MIN_REPLICAS: '0',
      KEYGATE_ALLOW_VOLATILE_KEY_CHANGES: 'true',
    });
    const api = managementClient(ops.managementUrl!, tokens.tokens.ops!);

    const frozenAt = Date.now();
    cluster.freeze(subscriberNode);
    console.log(`[cluster-hang] subscriber node ${subscriberNode} frozen (key records on ${keystoreMaster})`);
    try {
      // The change script runs on the key records' master, which is not frozen, but the instance's own connection
      // may be waiting on the frozen node (a keyless command, a slot-table read) and miss its deadline: then the
      // revoke is refused, honestly, 503 with its reason, and a retry is safe. What it must never do is
      // acknowledge a revoke that is not in force: a 200, or a 409 (an earlier try was written), means revoked.
      const answers: Array<[number, string]> = [];
      await until(
        'the revoke is acknowledged',
        async () => {
          const r = await api.call('POST', `/v1/keys/${apiKey}/revoke`, { json: {} });
          answers.push([r.status, r.status >= 400 ? (r.json() as { error: string }).error : '']);
          return r.status !== 503;
        },
        30_000,
      );
      const revokedAt = Date.now();
      console.log(`[cluster-hang] revoke answers while the node hangs: ${JSON.stringify(answers)}`);
      const [status, error] = answers.pop()!;
      expect(status === 200 || (status === 409 && answers.length > 0), `${status} ${error}`).toBe(true);
      expect(answers.filter(([s, e]) => !(s === 503 && ['store_unavailable', 'not_durable'].includes(e)))).toEqual([]);
      // In force where the key records live (read from their master directly: the instance's reads may be refused).
      const records = client(keystoreMaster, PASSWORD);
      try {
        await records.connect();
        const raw = await records.hget(`keygate:{keystore}:key:${apiKey}`, 'json');
        expect(JSON.parse(raw ?? '{}')).toMatchObject({ state: 'revoked' });
      } finally {
        records.disconnect();
      }
      // Before the change: the key kept passing until its cache entry expired (LONG_CACHE_TTL_MS).
      // Now: HEARTBEAT_MISSES heartbeats unheard (plus the one under way) and the cache is flushed;
      // the subscriber reconnects (a slot table read that may wait CONNECT_TIMEOUT_MS on the frozen
      // node, twice) and is trusted again once its heartbeat is heard.
      const bound = (HEARTBEAT_MISSES + 1) * HEARTBEAT_MS + 2 * CONNECT_TIMEOUT_MS + HEARTBEAT_MS + 1_000;
      const seen: Record<string, number> = {};
      await until(
        'the revoked key is refused',
        async () => {
          const st = (await call(gate!, token(apiKey, SECRET))).status;
          seen[st] = (seen[st] ?? 0) + 1;
          return st === 404;
        },
        bound + 20_000,
      ).catch(async (err: unknown) => {
        const roles = await Promise.all(
          cluster.ports
            .filter((p) => p !== subscriberNode)
            .map(async (p) => `${p}:${(await cluster.slotMasters(p).catch(() => [])).map((r) => r.port).join('/')}`),
        );
        console.log(
          `[cluster-hang] statuses ${JSON.stringify(seen)}; key ${apiKey}; masters per node ${roles.join(' ')}`,
        );
        throw err;
      });
      const refusedAt = Date.now();
      console.log(
        `[cluster-hang] subscriber node frozen: revocation ${revokedAt - frozenAt} ms after the freeze, in force ${refusedAt - frozenAt} ms after it (bound ${bound} ms; cluster-node-timeout ${CLUSTER_NODE_TIMEOUT_MS} ms)`,
      );
      // The bound runs from the later of the freeze and the acknowledgement: a revoke acknowledged after a refusal
      // was made later, and the heartbeat's count started at the freeze either way.
      expect(refusedAt - Math.max(frozenAt, revokedAt)).toBeLessThanOrEqual(bound);
      // The key may be refused before the heartbeats are missed (its cache entry already gone): the
      // subscriber's loss is still noticed and said, within the heartbeat bound from the freeze.
      await expect
        .poll(() => gate!.logs.some((l) => l.includes('change messages not heard on the subscriber')), {
          timeout: Math.max(0, bound - (Date.now() - frozenAt)) + 5_000,
          interval: 100,
        })
        .toBe(true);
    } finally {
      cluster.thaw(subscriberNode);
      for (const l of gate!.logs.filter((l) => !l.includes('"msg":"request"')))
        console.log(`[cluster-hang] +${(JSON.parse(l) as { time: number }).time - frozenAt} ms ${l.slice(0, 200)}`);
    }
  }, 120_000);
});
