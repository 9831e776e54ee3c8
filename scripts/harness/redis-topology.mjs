// @ts-check
// Real Redis topologies on free loopback ports: a Cluster (masters, optionally with replicas) and a
// master + replica + sentinel. Shared by the tests (test/helpers/redis-topology.ts re-exports them
// with the suite's types) and the benchmark scripts (scripts/bench-key-changes.mjs). Plain ESM with
// JSDoc types, like the rest of scripts/harness/.
import { execFile, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { claimPort, freePort, HARNESS_PORTS_END } from './free-port.mjs';
import { redisServerAvailable } from './redis-server.mjs';
import { startTcpRelayProcess } from './tcp-relay.mjs';

const run = promisify(execFile);

/**
 * A redis-server process started here.
 * @typedef {object} Proc
 * @property {number} port
 * @property {() => Promise<void>} kill
 * @property {(sig: 'SIGSTOP' | 'SIGCONT') => void} signal SIGSTOP / SIGCONT: a node that hangs rather than dies (no connection closes)
 */

function requireRedis() {
  if (!redisServerAvailable() || spawnSync('redis-cli', ['--version'], { stdio: 'ignore' }).status !== 0) {
    throw new Error(
      'redis-server or redis-cli is not on PATH: the Cluster and Sentinel tests need both (apt-get install -y redis-server, which pulls in redis-tools).',
    );
  }
}

/**
 * @param {number} port
 * @param {string[]} args
 * @returns {Proc}
 */
function spawnRedis(port, args) {
  const proc = spawn('redis-server', args, { stdio: 'ignore' });
  return {
    port,
    kill: async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGKILL');
      await exited;
    },
    signal: (sig) => void proc.kill(sig),
  };
}

/**
 * A client that fails fast (no retries, no offline queue); connect() it yourself.
 * @param {number} port
 * @param {string} [password]
 * @returns {Redis}
 */
export function client(port, password) {
  const c = new Redis({
    host: '127.0.0.1',
    port,
    ...(password && { password }),
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  c.on('error', () => {});
  return c;
}

/**
 * Polls `check` until it returns true (errors count as false).
 * @param {string} what
 * @param {() => Promise<boolean>} check
 * @param {number} [timeoutMs]
 */
export async function until(what, check, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  /** @type {unknown} */
  let last;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}

/**
 * @param {number} port
 * @param {string | undefined} password
 * @param {string[]} command
 * @param {(reply: unknown) => boolean} expect
 */
async function answers(port, password, command, expect) {
  const c = client(port, password);
  try {
    await c.connect();
    const [name, ...rest] = command;
    return expect(await c.call(/** @type {string} */ (name), ...rest));
  } finally {
    c.disconnect();
  }
}

/**
 * A port p such that p + 10000 (the cluster bus port) is claimed too, both below the kernel's ephemeral range.
 * @param {Set<number>} taken
 */
async function clusterPort(taken) {
  for (;;) {
    const p = await freePort({ below: HARNESS_PORTS_END - 10_000 });
    if (taken.has(p) || taken.has(p + 10_000)) continue;
    if (await claimPort(p + 10_000)) {
      taken.add(p).add(p + 10_000);
      return p;
    }
  }
}

/**
 * @typedef {object} TestCluster
 * @property {string} nodes "127.0.0.1:p1,127.0.0.1:p2,..." for KEYGATE_REDIS_CLUSTER_NODES
 * @property {readonly number[]} ports
 * @property {readonly number[]} masterPorts the ports of the nodes that were masters at the start (all of them without replicas)
 * @property {string | undefined} password
 * @property {(port: number) => void} freeze SIGSTOP the node on `port`: it hangs, its connections stay open (the cluster fails it over after cluster-node-timeout)
 * @property {(port: number) => void} thaw SIGCONT: the node resumes (a failed-over master rejoins as a replica)
 * @property {(askPort: number) => Promise<Array<{ from: number, to: number, port: number }>>} slotMasters the current masters, from CLUSTER SLOTS on a node that is not frozen: slot ranges by master port
 * @property {(key: string) => Promise<number>} keySlot CLUSTER KEYSLOT of `key` (asked of the first node: freeze another)
 * @property {() => Promise<void>} stop
 */

/** Cluster node-timeout of the test clusters (ms): a node silent this long is failed over. */
export const CLUSTER_NODE_TIMEOUT_MS = 2_000;

/**
 * N masters (and `replicasPerMaster` replicas of each, default none), slots spread by redis-cli --cluster create.
 * @param {{ masters?: number, replicasPerMaster?: number, password?: string }} [options]
 * @returns {Promise<TestCluster>}
 */
export async function startRedisCluster(options = {}) {
  requireRedis();
  const replicas = options.replicasPerMaster ?? 0;
  const n = (options.masters ?? 3) * (1 + replicas);
  const password = options.password;
  const dir = mkdtempSync(join(tmpdir(), 'keygate-cluster-'));
  /** @type {Set<number>} */
  const taken = new Set();
  /** @type {number[]} */
  const ports = [];
  for (let i = 0; i < n; i++) ports.push(await clusterPort(taken));
  const auth = password ? ['--requirepass', password, '--masterauth', password] : [];
  const procs = ports.map((port) =>
    spawnRedis(port, [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      `nodes-${port}.conf`,
      '--cluster-node-timeout',
      String(CLUSTER_NODE_TIMEOUT_MS),
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      ...auth,
    ]),
  );
  const stop = async () => {
    await Promise.all(procs.map((p) => p.kill()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const port of ports)
      await until(`cluster node ${port}`, () => answers(port, password, ['PING'], (r) => r === 'PONG'), 5_000);
    await run(
      'redis-cli',
      [
        ...(password ? ['-a', password, '--no-auth-warning'] : []),
        '--cluster',
        'create',
        ...ports.map((p) => `127.0.0.1:${p}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ],
      { timeout: 30_000 },
    );
    for (const port of ports) {
      await until(
        `cluster_state:ok on ${port}`,
        () => answers(port, password, ['CLUSTER', 'INFO'], (r) => String(r).includes('cluster_state:ok')),
        15_000,
      );
    }
    // Every replica in sync, so a key change that waits for one (KEYGATE_REDIS_MIN_REPLICAS) can get it.
    if (replicas > 0)
      for (const port of ports)
        await until(
          `replication up on ${port}`,
          () =>
            answers(port, password, ['INFO', 'replication'], (r) =>
              /role:master/.test(String(r))
                ? new RegExp(`connected_slaves:${replicas}`).test(String(r))
                : String(r).includes('master_link_status:up'),
            ),
          15_000,
        );
  } catch (err) {
    await stop();
    throw err;
  }
  /** @type {number[]} */
  const masterPorts = [];
  for (const port of ports)
    if (await answers(port, password, ['INFO', 'replication'], (r) => String(r).includes('role:master')))
      masterPorts.push(port);
  const byPort = new Map(ports.map((p, i) => [p, /** @type {Proc} */ (procs[i])]));
  /** @param {number} port */
  const proc = (port) => {
    const p = byPort.get(port);
    if (!p) throw new Error(`no cluster node on port ${port}`);
    return p;
  };
  /**
   * @param {number} port
   * @param {string[]} command
   * @returns {Promise<unknown>}
   */
  const ask = async (port, command) => {
    const c = client(port, password);
    try {
      await c.connect();
      const [name, ...rest] = command;
      return await c.call(/** @type {string} */ (name), ...rest);
    } finally {
      c.disconnect();
    }
  };
  return {
    nodes: ports.map((p) => `127.0.0.1:${p}`).join(','),
    ports,
    masterPorts,
    password,
    freeze: (port) => proc(port).signal('SIGSTOP'),
    thaw: (port) => proc(port).signal('SIGCONT'),
    slotMasters: async (askPort) =>
      /** @type {Array<[number, number, [string, number]]>} */ (await ask(askPort, ['CLUSTER', 'SLOTS'])).map(
        ([from, to, m]) => ({ from, to, port: Number(m[1]) }),
      ),
    keySlot: async (key) =>
      /** @type {number} */ (await ask(/** @type {number} */ (ports[0]), ['CLUSTER', 'KEYSLOT', key])),
    stop,
  };
}

/**
 * @typedef {object} TestSentinel
 * @property {string} sentinels "127.0.0.1:port" for KEYGATE_REDIS_SENTINELS
 * @property {string} masterName
 * @property {string | undefined} password
 * @property {number} masterPort
 * @property {number} replicaPort
 * @property {number} sentinelPort
 * @property {import('./tcp-relay.mjs').RelayProcess | undefined} relay with `relay: true`: the link the replica replicates through, in a process of its own (hold() makes it lag)
 * @property {() => Promise<number>} currentMasterPort port of the node the sentinel currently calls master
 * @property {() => Promise<void>} killMaster SIGKILL the current master process
 * @property {() => Promise<void>} forceFailover asks the sentinel for a failover now (the master stays alive and becomes a replica)
 * @property {() => Promise<void>} waitReplicated waits until every write made so far on the master has reached the replica
 * @property {() => Promise<void>} waitHealthy waits until the sentinel sees one healthy replica of the current master, in sync
 * @property {() => Promise<void>} stop
 */

/**
 * One master, one replica and one sentinel (quorum 1), failover after `downAfterMs` (default 1 s) of silence.
 * `relay`: the replica replicates through a TCP relay the test can hold (a lagging replica).
 * `downAfterMs`: longer for a test whose premise a failover of the sentinel's own (a master too starved to
 * answer its PING in time) would break.
 * @param {{ password?: string, masterName?: string, relay?: boolean, downAfterMs?: number }} [options]
 * @returns {Promise<TestSentinel>}
 */
export async function startRedisSentinel(options = {}) {
  requireRedis();
  const password = options.password;
  const masterName = options.masterName ?? 'keygate-master';
  const dir = mkdtempSync(join(tmpdir(), 'keygate-sentinel-'));
  const [masterPort, replicaPort, sentinelPort] = [await freePort(), await freePort(), await freePort()];
  const auth = password ? ['--requirepass', password, '--masterauth', password] : [];
  const common = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...auth];
  /** @type {Map<number, Proc>} */
  const byPort = new Map();
  byPort.set(masterPort, spawnRedis(masterPort, ['--port', String(masterPort), ...common]));
  const relay = options.relay ? await startTcpRelayProcess(masterPort) : undefined;
  const upstreamPort = relay?.port ?? masterPort;
  byPort.set(
    replicaPort,
    spawnRedis(replicaPort, [
      '--port',
      String(replicaPort),
      '--replicaof',
      '127.0.0.1',
      String(upstreamPort),
      ...common,
    ]),
  );
  const conf = join(dir, 'sentinel.conf');
  writeFileSync(
    conf,
    [
      `port ${sentinelPort}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      // Through the relay when there is one: the replica's master and the sentinel's must agree, or the
      // sentinel "fixes" the replica to replicate from the master directly.
      `sentinel monitor ${masterName} 127.0.0.1 ${upstreamPort} 1`,
      `sentinel down-after-milliseconds ${masterName} ${options.downAfterMs ?? 1000}`,
      `sentinel failover-timeout ${masterName} 10000`,
      `sentinel parallel-syncs ${masterName} 1`,
      ...(password ? [`sentinel auth-pass ${masterName} ${password}`] : []),
      '',
    ].join('\n'),
  );
  const sentinel = spawnRedis(sentinelPort, [conf, '--sentinel']);
  const stop = async () => {
    await Promise.all([...byPort.values(), sentinel].map((p) => p.kill()));
    await relay?.close();
    rmSync(dir, { recursive: true, force: true });
  };
  const currentMasterPort = async () => {
    const c = client(sentinelPort);
    try {
      await c.connect();
      const [, port] = /** @type {[string, string]} */ (
        await c.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', masterName)
      );
      // The master's own port, also when the sentinel knows it through the relay.
      return Number(port) === relay?.port ? masterPort : Number(port);
    } finally {
      c.disconnect();
    }
  };
  const waitReplicated = async () => {
    const c = client(await currentMasterPort(), password);
    try {
      await c.connect();
      await c.set('keygate-test:replication-probe', String(Date.now()));
      const acked = /** @type {number} */ (await c.call('WAIT', '1', '5000'));
      if (acked < 1) throw new Error('replica did not acknowledge within 5 s');
    } finally {
      c.disconnect();
    }
  };
  const waitHealthy = async () => {
    let master = 0;
    await until('sentinel answers', async () => (master = await currentMasterPort()) > 0, 5_000);
    const replica = master === masterPort ? replicaPort : masterPort;
    await until(
      `replica ${replica} in sync with master ${master}`,
      () =>
        answers(
          replica,
          password,
          ['INFO', 'replication'],
          (r) =>
            String(r).includes('master_link_status:up') &&
            String(r).includes(`master_port:${master === masterPort ? upstreamPort : master}`),
        ),
      15_000,
    );
    await until('sentinel sees one healthy replica', () =>
      answers(sentinelPort, undefined, ['SENTINEL', 'REPLICAS', masterName], (r) => {
        const healthy = /** @type {unknown[][]} */ (r).filter((fields) => {
          /** @type {Map<string, string>} */
          const f = new Map();
          for (let i = 0; i + 1 < fields.length; i += 2) f.set(String(fields[i]), String(fields[i + 1]));
          return (
            f.get('port') === String(replica) &&
            !f.get('flags')?.includes('down') &&
            f.get('master-link-status') === 'ok'
          );
        });
        return healthy.length === 1;
      }),
    );
  };
  try {
    await waitHealthy();
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    sentinels: `127.0.0.1:${sentinelPort}`,
    masterName,
    password,
    masterPort,
    replicaPort,
    sentinelPort,
    relay,
    currentMasterPort,
    waitReplicated,
    waitHealthy,
    killMaster: async () => {
      const p = byPort.get(await currentMasterPort());
      if (!p) throw new Error('the sentinel names a master this helper did not start');
      await p.kill();
    },
    forceFailover: async () => {
      const c = client(sentinelPort);
      try {
        await c.connect();
        await c.call('SENTINEL', 'FAILOVER', masterName);
      } finally {
        c.disconnect();
      }
    },
    stop,
  };
}
