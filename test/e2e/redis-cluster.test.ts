import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { client, startRedisCluster, until, type TestCluster } from '../helpers/redis-topology.js';
import { runKeygate } from '../helpers/spawn-keygate.js';
import { token } from '../helpers/tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { ACCOUNTS_PATH, LONG_CACHE_TTL_MS, PUBLISHED_WITHIN } from '../helpers/constants.js';
import { guard } from '../helpers/slowdown.js';

const SECRET = 'cluster-secret-0123456789abcdef';
const KEYS = Array.from({ length: 24 }, (_, i) => `ck-${i}`);
// Issue 42: keys of owners whose budgets (and so the keys' nonces) land in other slots than the keys' names.
const OWNED = ['co-a', 'co-b', 'co-c'].flatMap((owner) => [1, 2].map((n) => ({ apiKey: `${owner}-${n}`, owner })));

/** Real 3-master Redis Cluster (redis-cli --cluster create) behind three Keygate instances. */
describe('Redis Cluster', () => {
  let cluster: TestCluster;
  let upstream: RecordingUpstream;
  let gates: RunningKeygate[] = [];

  beforeAll(async () => {
    // One replica per master: key changes wait for one (KEYGATE_REDIS_MIN_REPLICAS defaults to 1 on Cluster).
    cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1, password: 'cluster-pass-0123' });
    upstream = await startRecordingUpstream();
    const dir = mkdtempSync(join(tmpdir(), 'keygate-cluster-'));
    const policy = join(dir, 'policy.yaml');
    writeFileSync(
      policy,
      `routes:\n  - { method: GET, path: ${ACCOUNTS_PATH}, scopes: [accounts:read] }\n` +
        'defaultOwnerRateLimit: { rate: 6/h }\nfailedAuthLimit: { rate: 100/h, burst: 100 }\n',
    );
    const env = (nodes: string) => ({
      KEYGATE_CONFIG: policy,
      KEYGATE_REDIS_CLUSTER_NODES: nodes,
      KEYGATE_REDIS_PASSWORD: cluster.password!,
      KEYGATE_KEY_CACHE_TTL_MS: String(LONG_CACHE_TTL_MS),
      // These cases are about the instances sharing one cluster, not the command deadline: at the 500 ms default a
      // starved machine (redis-server and Keygate waiting for a core) got 503s, Keygate failing closed as it should.
      KEYGATE_REDIS_TIMEOUT_MS: '5000',
    });
    // One instance knows a single seed node and discovers the rest.
    gates = [
      await startKeygate({
        upstream: upstream.url,
        env: env(cluster.nodes.split(',')[0]!),
        keys: KEYS.map((apiKey) => makeKey({ apiKey, secret: SECRET })),
      }),
      await startKeygate({ upstream: upstream.url, env: env(cluster.nodes) }),
      await startKeygate({ upstream: upstream.url, env: env(cluster.nodes) }),
    ];
  }, guard(60_000));
  afterAll(async () => {
    for (const g of gates) await g.close();
    await upstream?.close();
    await cluster?.stop();
  });

  const status = async (gate: RunningKeygate, t: string) =>
    (await send(gate.url, ACCOUNTS_PATH, { headers: bearer(t) })).status;
  const countOnNode = async (port: number, pattern: string) => {
    const c = client(port, cluster.password);
    await c.connect();
    let n = 0;
    let cursor = '0';
    do {
      const [next, batch] = await c.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      n += batch.length;
    } while (cursor !== '0');
    c.disconnect();
    return n;
  };

  it('authenticates keys spread over every master, and catches replays on another instance', async () => {
    const used: string[] = [];
    for (const [i, apiKey] of KEYS.entries()) {
      const t = token(apiKey, SECRET);
      expect(await status(gates[i % 3]!, t), apiKey).toBe(200);
      used.push(t);
    }
    for (const [i, t] of used.entries())
      expect((await send(gates[(i + 1) % 3]!.url, ACCOUNTS_PATH, { headers: bearer(t) })).json()).toEqual({
        code: 40106,
        message: 'Invalid Token',
      });
    expect(upstream.received.length).toBe(KEYS.length);
    await Promise.all(gates.map((g) => g.keygate.store.flushUsage())); // usage is written in batches
    // Nonces really live on all three masters: the admit script touches one key's nonce, GCRA state
    // and usage, all under its {apiKey} hash tag: one slot, so no CROSSSLOT. Key records share the
    // {keystore} tag (one slot, so a key change is one atomic script): all on one master.
    const perNode = await Promise.all(
      cluster.masterPorts.map(async (p) => ({
        port: p,
        records: await countOnNode(p, 'keygate:{keystore}:key:*'),
        nonces: await countOnNode(p, 'keygate:{*}:nonce:*'),
        usage: await countOnNode(p, 'keygate:{*}:usage'),
      })),
    );
    console.log(`cluster key placement: ${JSON.stringify(perNode)}`);
    // Names are fixed per key, so their spread over the masters is deterministic.
    expect(perNode.filter((n) => n.records > 0)).toHaveLength(1);
    expect(perNode.reduce((sum, n) => sum + n.nonces, 0)).toBe(KEYS.length);
    expect(perNode.filter((n) => n.nonces > 0).length).toBeGreaterThanOrEqual(2);
    expect(perNode.reduce((sum, n) => sum + n.usage, 0)).toBe(KEYS.length);
  });

  it('a change published on any node reaches every instance', async () => {
    const invalidations = async (g: RunningKeygate) =>
      (await g.keygate.metrics.invalidations.get()).values[0]?.value ?? 0;
    for (const port of cluster.ports) {
      const before = await Promise.all(gates.map(invalidations));
      const c = client(port, cluster.password);
      await c.connect();
      await c.publish('keygate:key-events', 'ck-0');
      c.disconnect();
      for (const [i, g] of gates.entries()) {
        await expect
          .poll(() => invalidations(g), {
            timeout: 2_000,
            interval: 20,
            message: `instance ${i} hears a PUBLISH on node ${port}`,
          })
          .toBeGreaterThan(before[i]!);
      }
    }
  });

  it('a key revoked with the CLI is refused by every instance within 1 second', async () => {
    for (const g of gates) expect(await status(g, token('ck-5', SECRET))).toBe(200);
    await runKeygate(['keys', 'revoke', 'ck-5', '--reason', 'cluster test'], {
      KEYGATE_REDIS_URL: '',
      KEYGATE_REDIS_CLUSTER_NODES: cluster.nodes,
      KEYGATE_REDIS_PASSWORD: cluster.password,
      KEYGATE_REDIS_TIMEOUT_MS: '5000',
    });
    const cliDone = Date.now();
    for (const g of gates) await expect.poll(() => status(g, token('ck-5', SECRET)), PUBLISHED_WITHIN).toBe(404);
    console.log(`cluster revocation reached all 3 instances ${Date.now() - cliDone} ms after the CLI returned`);
    expect(await status(gates[0]!, token('ck-6', SECRET))).toBe(200);
    const { stdout } = await runKeygate(['keys', 'list', '--json'], {
      KEYGATE_REDIS_URL: '',
      KEYGATE_REDIS_CLUSTER_NODES: cluster.nodes,
      KEYGATE_REDIS_PASSWORD: cluster.password,
      KEYGATE_REDIS_TIMEOUT_MS: '5000',
    });
    expect((JSON.parse(stdout) as Array<{ apiKey: string }>).map((k) => k.apiKey).sort()).toEqual([...KEYS].sort());
    // The audit stream is read on the {keystore} slot's node, like the records it sits beside.
    const audit = await runKeygate(['audit', '--key', 'ck-5', '--json'], {
      KEYGATE_REDIS_URL: '',
      KEYGATE_REDIS_CLUSTER_NODES: cluster.nodes,
      KEYGATE_REDIS_PASSWORD: cluster.password,
      KEYGATE_REDIS_TIMEOUT_MS: '5000',
    });
    expect(JSON.parse(audit.stdout)).toEqual([
      expect.objectContaining({ action: 'revoke', apiKey: 'ck-5', reason: 'cluster test' }),
    ]);
  });

  it("a rate limit is shared by every instance (GCRA state under the key's hash tag)", async () => {
    const store = gates[0]!.keygate.store;
    await store.putKey(makeKey({ apiKey: 'ck-limited', secret: SECRET, rateLimit: { rate: '5/m' } }));
    // The other instances learn of a key made elsewhere from its change message (their known-keys filter
    // answers "unknown" until then, a 404): the burst is sent once every instance has heard of it.
    await until('every instance has heard of the new key', async () =>
      gates.every((g) => g.keygate.store.mayHaveKey?.('ck-limited') !== false),
    );
    const codes = await Promise.all(
      Array.from({ length: 12 }, (_, i) => status(gates[i % 3]!, token('ck-limited', SECRET))),
    );
    // Compared whole, so a failure shows every answer (a 404 or 503 says more than a count).
    expect([...codes].sort()).toEqual([...Array<number>(5).fill(200), ...Array<number>(7).fill(429)]);
    await Promise.all(gates.map((g) => g.keygate.store.flushUsage())); // each instance writes its own counts
    expect(Object.values((await store.getUsage('ck-limited')).perDay)).toEqual([5]);
    await store.deleteKey('ck-limited');
  });

  it('owner budgets on a Cluster: each owner admits exactly its 6 across its two keys and three instances, in one slot per owner', async () => {
    for (const { apiKey, owner } of OWNED)
      await gates[0]!.keygate.store.putKey(makeKey({ apiKey, owner, secret: SECRET }));
    await until('every instance has heard of the owned keys', async () =>
      gates.every((g) => OWNED.every(({ apiKey }) => g.keygate.store.mayHaveKey?.(apiKey) !== false)),
    );
    const before = upstream.received.length;
    let admitted = 0;
    for (const owner of ['co-a', 'co-b', 'co-c']) {
      const statuses: number[] = [];
      for (let i = 0; i < 9; i++) statuses.push(await status(gates[i % 3]!, token(`${owner}-${(i % 2) + 1}`, SECRET)));
      // The promise is the budget: never more than 6 admitted, then 429. A 503 (the store did not answer in time
      // on a starved machine) is an honest refusal that may have spent its unit; without one, exactly 6 pass.
      const ok = statuses.filter((s) => s === 200).length;
      const unavailable = statuses.filter((s) => s === 503).length;
      expect(
        statuses.filter((s) => ![200, 429, 503].includes(s)),
        owner,
      ).toEqual([]);
      // Once empty, the budget stays empty (6/h refills one unit in 10 minutes): no 200 after the first 429.
      if (statuses.includes(429)) expect(statuses.lastIndexOf(200), owner).toBeLessThan(statuses.indexOf(429));
      expect(ok, `${owner}: ${statuses.join(' ')}`).toBeLessThanOrEqual(6);
      expect(ok + unavailable, `${owner}: ${statuses.join(' ')}`).toBeGreaterThanOrEqual(6);
      if (unavailable === 0) expect(statuses, owner).toEqual([...Array(6).fill(200), ...Array(3).fill(429)]);
      admitted += ok;
    }
    expect(upstream.received.length).toBe(before + admitted);
    // The owners' budgets and their keys' nonces are spread over the masters by {owner:<owner>}.
    const owners = await Promise.all(cluster.masterPorts.map((p) => countOnNode(p, 'keygate:{owner:*}:budget')));
    expect(owners.reduce((a, b) => a + b, 0)).toBe(3);
  });

  it("an owner's own limit on a Cluster: set through one instance (owners hash, {keystore} slot), every instance holds the owner to it", async () => {
    const store = gates[0]!.keygate.store;
    for (const n of [1, 2]) await store.putKey(makeKey({ apiKey: `co-own-${n}`, owner: 'co-own', secret: SECRET }));
    await store.putOwner({ owner: 'co-own', rateLimit: { rate: '2/h', burst: 2 } }, undefined);
    await until('every instance has the owner limit and the keys', async () =>
      gates.every(
        (g) =>
          g.keygate.store.ownerLimit('co-own')?.burst === 2 &&
          [1, 2].every((n) => g.keygate.store.mayHaveKey?.(`co-own-${n}`) !== false),
      ),
    );
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push(await status(gates[i % 3]!, token(`co-own-${(i % 2) + 1}`, SECRET)));
    // Its own 2/h, not the policy's 6/h.
    expect(statuses).toEqual([200, 200, 429, 429]);
    expect((await gates[2]!.keygate.store.ownerBudget('co-own', store.ownerLimit('co-own')!)).remaining).toBe(0);
  });

  it('failed-authentication budget on a Cluster: 100 forged tokens from one IP on one instance block it on the others', async () => {
    for (let i = 0; i < 100; i++)
      expect(
        (
          await send(gates[0]!.url, ACCOUNTS_PATH, {
            headers: bearer(token('ck-0', 'wrong-secret-0123456789')),
            from: '127.0.0.41',
          })
        ).status,
      ).toBe(401);
    // The IP's budget is one name in one slot, spent to empty.
    const spent = await Promise.all(cluster.masterPorts.map((p) => countOnNode(p, 'keygate:{ipfail:127.0.0.41}')));
    expect(spent.reduce((a, b) => a + b, 0)).toBe(1);
    // On a Cluster the block crosses the cluster bus to the node each instance subscribes on: heard a moment later.
    for (const gate of gates.slice(1)) {
      const blocked = () =>
        send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('ck-1', SECRET)), from: '127.0.0.41' });
      await expect.poll(async () => (await blocked()).status, PUBLISHED_WITHIN).toBe(429);
      expect((await blocked()).headers['ratelimit-policy']).toBe('"keygate-ip";q=100;w=3600');
    }
    expect(await status(gates[2]!, token('ck-2', SECRET))).toBe(200); // from 127.0.0.1
  });
});
