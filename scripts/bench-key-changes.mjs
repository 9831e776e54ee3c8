#!/usr/bin/env node
// @ts-check
// What durability adds to a key change, per Redis topology (issue 28): the latency of create, patch
// and revoke through the management API, with KEYGATE_REDIS_MIN_REPLICAS at its default (WAIT for a
// replica under Sentinel and Cluster) and at 0 (no WAIT, as before), side by side on the same servers.
//
// Topologies, one after the other (each stopped before the next starts):
//   single    one redis-server (KEYGATE_REDIS_URL): MIN_REPLICAS 0, the default, so no WAIT
//   replica   master + 1 replica, KEYGATE_REDIS_URL at the master: MIN_REPLICAS=1 vs 0
//   sentinel  1 master, 1 replica, 1 sentinel: default (1) vs 0
//   cluster   3 masters x --cluster-replicas replicas: default (1) vs 0
// Within a topology, both Keygates run at once and each round measures them in turn, starting from
// a different one. One client, one operation at a time: the figure is a key change's own latency,
// not throughput. This is a benchmark, not a test: the figures are printed and written, never asserted.
import { randomBytes, createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  ROOT,
  createChildren,
  get,
  parseOptions,
  round3,
  runMain,
  startKeygate,
  startUpstream,
  writeResult,
} from './bench/lib.mjs';
import { freePort } from './harness/free-port.mjs';
import { startRedisServer } from './harness/redis-server.mjs';
import { client, startRedisCluster, startRedisSentinel } from './harness/redis-topology.mjs';

const USAGE = `
Usage: npm run bench:key-changes -- [options]

  --topologies LIST     single,replica,sentinel,cluster (default all four)
  --ops N               operations of each kind per Keygate and round (default 20)
  --rounds N            rounds (default 3)
  --cluster-replicas N  replicas per master in the Cluster of 3 masters (default 1)
  --out FILE            result file (default bench-results/key-changes-latest.json)

  npm run bench:key-changes                                   every topology, 60 of each operation per Keygate
  npm run bench:key-changes -- --topologies cluster --cluster-replicas 3
`;
const TOPOLOGIES = ['single', 'replica', 'sentinel', 'cluster'];
const OPS = /** @type {const} */ (['create', 'patch', 'revoke']);
const args = parseOptions(
  {
    topologies: { type: 'string', default: TOPOLOGIES.join(',') },
    ops: { type: 'string', default: '20' },
    rounds: { type: 'string', default: '3' },
    'cluster-replicas': { type: 'string', default: '1' },
    out: { type: 'string', default: join(ROOT, 'bench-results', 'key-changes-latest.json') },
  },
  USAGE,
);
const N = Number(args.ops);
const ROUNDS = Number(args.rounds);
const CLUSTER_REPLICAS = Number(args['cluster-replicas']);
const chosen = args.topologies.split(',').map((s) => s.trim());
for (const t of chosen) if (!TOPOLOGIES.includes(t)) throw new Error(`--topologies: unknown topology ${t}`);
if (!(N >= 1 && ROUNDS >= 1 && CLUSTER_REPLICAS >= 1))
  throw new Error('--ops, --rounds and --cluster-replicas: 1 or more');

const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-key-changes-'));
const children = createChildren(dir, ROOT);

/** A management token (write access) and the tokens file naming its SHA-256. */
const TOKEN = randomBytes(24).toString('base64url');
const tokensFile = join(dir, 'management-tokens.yaml');
writeFileSync(
  tokensFile,
  `tokens:\n  - { name: bench, sha256: ${createHash('sha256').update(TOKEN).digest('hex')}, access: write }\n`,
);

/** @typedef {{ name: string, minReplicas: number, api: string }} Variant */
/** @typedef {Record<typeof OPS[number], number[]>} Samples latency in ms per operation */

/**
 * One management API call; throws unless it answered `expect`.
 * @param {string} api
 * @param {string} method
 * @param {string} path
 * @param {unknown} body
 * @param {number} expect
 */
async function call(api, method, path, body, expect) {
  const t0 = performance.now();
  const r = await fetch(`${api}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await r.text();
  const ms = performance.now() - t0;
  if (r.status !== expect) throw new Error(`${method} ${path}: ${r.status} ${text.slice(0, 300)}`);
  return { ms, json: /** @type {{ apiKey: string }} */ (JSON.parse(text)) };
}

/**
 * `N` creates, then a patch of each key, then a revoke of each: one at a time.
 * @param {Variant} v
 * @param {Samples} into
 */
async function measure(v, into) {
  /** @type {string[]} */
  const keys = [];
  for (let i = 0; i < N; i++) {
    const r = await call(v.api, 'POST', '/v1/keys', { scopes: ['accounts:read'] }, 201);
    into.create.push(r.ms);
    keys.push(r.json.apiKey);
  }
  for (const k of keys) into.patch.push((await call(v.api, 'PATCH', `/v1/keys/${k}`, { label: 'bench' }, 200)).ms);
  for (const k of keys) into.revoke.push((await call(v.api, 'POST', `/v1/keys/${k}/revoke`, {}, 200)).ms);
}

/**
 * WAIT commands the masters on `ports` have run (INFO commandstats): proof that the Keygate set to
 * wait did, and the other did not.
 * @param {number[]} ports
 */
async function waitCalls(ports) {
  let calls = 0;
  for (const port of ports) {
    const c = client(port);
    try {
      await c.connect();
      calls += Number(/cmdstat_wait:calls=(\d+)/.exec(await c.info('commandstats'))?.[1] ?? 0);
    } finally {
      c.disconnect();
    }
  }
  return calls;
}

/** @param {number[]} xs @param {number} q */
function quantile(xs, q) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
}

/**
 * Keygates on one topology (`redisEnv`), one per MIN_REPLICAS value, measured in alternating rounds.
 * @param {string} topology
 * @param {Record<string, string>} redisEnv
 * @param {number[]} minReplicas
 * @param {string} upstreamUrl
 * @param {() => Promise<number[]>} masterPorts the masters' ports, read after the run
 */
async function runTopology(topology, redisEnv, minReplicas, upstreamUrl, masterPorts) {
  /** @type {Variant[]} */
  const variants = [];
  /** @type {Array<() => unknown>} */
  const stops = [];
  for (const n of minReplicas) {
    const managementPort = await freePort();
    const kg = await startKeygate(children, `${topology}-wait${n}`, upstreamUrl, {
      ...redisEnv,
      KEYGATE_REDIS_MIN_REPLICAS: String(n),
      // The comparison without WAIT on replicas that keep no AOF: volatile by design (issue 46).
      ...(n === 0 && { KEYGATE_ALLOW_VOLATILE_KEY_CHANGES: 'true' }),
      KEYGATE_MANAGEMENT_PORT: String(managementPort),
      KEYGATE_MANAGEMENT_TOKENS_FILE: tokensFile,
      KEYGATE_LOG_LEVEL: 'warn',
    });
    stops.push(() => kg.child.kill('SIGTERM'));
    variants.push({ name: `minReplicas=${n}`, minReplicas: n, api: `http://127.0.0.1:${managementPort}` });
  }
  /** @type {Record<string, Samples>} */
  const samples = Object.fromEntries(variants.map((v) => [v.name, { create: [], patch: [], revoke: [] }]));
  // Warm-up: connections, JIT, the key-change script loaded on every master.
  for (const v of variants) await measure(v, { create: [], patch: [], revoke: [] });
  // Counted from here: a Keygate's own writes at start (its keystore epoch marker, issue 46) wait too.
  const waitsBefore = await waitCalls(await masterPorts());
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < variants.length; i++) {
      const v = /** @type {Variant} */ (variants[(i + round) % variants.length]);
      await measure(v, get(samples, v.name));
      const s = get(samples, v.name);
      const last = (/** @type {number[]} */ xs) => quantile(xs.slice(-N), 0.5).toFixed(1);
      console.log(
        `${topology.padEnd(8)} round ${round + 1}/${ROUNDS} ${v.name.padEnd(13)} median ms: create ${last(s.create)}, patch ${last(s.patch)}, revoke ${last(s.revoke)}`,
      );
    }
  }
  for (const stop of stops) stop();
  const waits = (await waitCalls(await masterPorts())) - waitsBefore;
  const summary = Object.fromEntries(
    variants.map((v) => {
      const s = get(samples, v.name);
      return [
        v.name,
        Object.fromEntries(
          OPS.map((op) => [
            op,
            { n: s[op].length, p50Ms: round3(quantile(s[op], 0.5)), p95Ms: round3(quantile(s[op], 0.95)) },
          ]),
        ),
      ];
    }),
  );
  /** @type {Record<string, number> | undefined} */
  let waitVsNone;
  if (minReplicas.length === 2) {
    const [w, z] = /** @type {[Variant, Variant]} */ (variants);
    waitVsNone = Object.fromEntries(
      OPS.map((op) => {
        const a = get(summary, w.name)[op];
        const b = get(summary, z.name)[op];
        return [op, round3((a?.p50Ms ?? NaN) / (b?.p50Ms ?? NaN))];
      }),
    );
  }
  // Key changes made by the Keygate that waits in the measured rounds, 3 per key (each made 1 WAIT per master written).
  const changesThatWait = minReplicas.includes(1) ? ROUNDS * N * OPS.length : 0;
  return {
    keygates: summary,
    ...(waitVsNone && { p50WaitVsNoWait: waitVsNone }),
    waitCommands: waits,
    keyChangesThatWait: changesThatWait,
  };
}

async function main() {
  const loadBefore = loadavg().map(round3);
  const upstream = await startUpstream(children);
  /** @type {Record<string, unknown>} */
  const topologies = {};
  for (const topology of chosen) {
    if (topology === 'single') {
      const redis = await startRedisServer({ dir, log: join(dir, 'redis-single.log') });
      children.track(redis.stop);
      try {
        topologies.single = await runTopology(
          'single',
          { KEYGATE_REDIS_URL: redis.url },
          [0],
          upstream.url,
          async () => [redis.port],
        );
      } finally {
        await redis.stop();
      }
    } else if (topology === 'replica' || topology === 'sentinel') {
      // The sentinel's master and replica; `replica` talks to the master directly (no sentinel in Keygate's view).
      const redis = await startRedisSentinel();
      children.track(redis.stop);
      try {
        /** @type {Record<string, string>} */
        const env =
          topology === 'replica'
            ? { KEYGATE_REDIS_URL: `redis://127.0.0.1:${redis.masterPort}` }
            : { KEYGATE_REDIS_SENTINELS: redis.sentinels, KEYGATE_REDIS_SENTINEL_NAME: redis.masterName };
        topologies[topology] = await runTopology(topology, env, [1, 0], upstream.url, async () => [
          await redis.currentMasterPort(),
        ]);
      } finally {
        await redis.stop();
      }
    } else {
      const cluster = await startRedisCluster({ masters: 3, replicasPerMaster: CLUSTER_REPLICAS });
      children.track(cluster.stop);
      try {
        topologies.cluster = await runTopology(
          'cluster',
          { KEYGATE_REDIS_CLUSTER_NODES: cluster.nodes },
          [1, 0],
          upstream.url,
          async () => [...cluster.masterPorts],
        );
      } finally {
        await cluster.stop();
      }
    }
  }
  const result = {
    startedAt: new Date().toISOString(),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model, node: process.version },
    loadAverage: { before: loadBefore, after: loadavg().map(round3) },
    settings: { opsPerKindPerRound: N, rounds: ROUNDS, clusterMasters: 3, clusterReplicasPerMaster: CLUSTER_REPLICAS },
    topologies,
  };
  console.log('topology  keygate        create p50/p95 ms   patch p50/p95 ms    revoke p50/p95 ms');
  for (const [topology, t] of Object.entries(topologies)) {
    const { keygates } = /** @type {{ keygates: Record<string, Record<string, { p50Ms: number, p95Ms: number }>> }} */ (
      t
    );
    for (const [name, ops] of Object.entries(keygates)) {
      const cells = OPS.map((op) => `${get(ops, op).p50Ms.toFixed(1)} / ${get(ops, op).p95Ms.toFixed(1)}`.padEnd(20));
      console.log(`${topology.padEnd(9)} ${name.padEnd(14)} ${cells.join('')}`);
    }
    const w = /** @type {{ waitCommands: number, keyChangesThatWait: number }} */ (t);
    console.log(
      `${topology.padEnd(9)} WAIT commands run by the masters: ${w.waitCommands} (key changes that wait: ${w.keyChangesThatWait})`,
    );
  }
  console.log(`load average before ${loadBefore.join(' ')}, after ${result.loadAverage.after.join(' ')}`);
  writeResult(args.out, result);
}

runMain(main, () => {
  children.killAll();
  rmSync(dir, { recursive: true, force: true });
});
