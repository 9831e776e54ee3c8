// @ts-check
// Three (or more) simulated regions on one machine, built on the delay line (regions-net.mjs): in each region's
// network namespace
//   - a request-state Redis: master, replica and a sentinel (quorum 1) watching them, AOF on;
//   - the keystore's copy: one node per region, the keystore region's the master, the others its replicas,
//     and a keystore sentinel (quorum 2: a majority of regions elsewhere can promote a new master);
//   - an upstream answering 200, and Keygate instances with KEYGATE_REGION, the keystore through every
//     region's sentinel, KEYGATE_KEYSTORE_REPLICA_URL on the region's own keystore node, and a policy whose
//     `regions:` map names every region's request-state sentinel group.
// The keystore region's node is both its master and its region's copy: with min-replicas-to-write 1, a master
// cut off from every replica refuses writes (the heartbeats included), so its region goes stale as a region
// cut off from the keystore must. Every service listens on its region's address with fixed ports: each
// namespace has a network stack of its own, so runs never collide. Shared by `npm run regions` and the regions
// test tier.
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes, createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { KEYGATE_BIN, childEnv, runKeygate } from './spawn-keygate.mjs';
import { killGroup } from './regions-net.mjs';
import { until } from './redis-topology.mjs';

/** Ports inside every region's namespace. */
export const PORTS = Object.freeze({
  requestMaster: 6379,
  requestReplica: 6380,
  requestSentinel: 26379,
  keystore: 6381,
  keystoreSentinel: 26380,
  upstream: 8080,
  keygate: 8001,
  admin: 9001,
  management: 9101,
});

/** The keystore's Sentinel master name. */
export const KEYSTORE_NAME = 'keystore';
/** KEYGATE_REDIS_TIMEOUT_MS of every instance here. */
export const REDIS_TIMEOUT_MS = 1_000;
/**
 * KEYGATE_KEYSTORE_MAX_STALENESS_MS of every instance here. The default (1 s) flapped on the shared 2-core machine
 * these runs are made on (load average 20 to 30, everything here at nice 10): heartbeats every 250 ms came back
 * late without any cut. The promise is the same with any bound: docs/regions.md#measurements.
 */
export const MAX_STALENESS_MS = 3_000;
/** Sentinel down-after of every group here (ms): a master silent this long is failed over. */
export const SENTINEL_DOWN_AFTER_MS = 1_000;

/**
 * @typedef {object} Instance one Keygate
 * @property {string} region
 * @property {string} name e.g. "fra-1"
 * @property {string} url proxy port, from the root namespace
 * @property {string} adminUrl
 * @property {string} managementUrl
 * @property {string} log its log file
 * @property {() => Promise<void>} stop
 */
/**
 * @typedef {object} RegionsTopology
 * @property {import('./regions-net.mjs').RegionsNet} net
 * @property {string} dir
 * @property {boolean} regionsOn whether Keygate runs with regions (KEYGATE_REGION and the policy's `regions:`)
 * @property {string} keystoreRegion where the keystore master started
 * @property {Instance[]} instances every Keygate, region by region
 * @property {string} managementToken a write token for every instance's management API
 * @property {Record<string, string>} cliEnv environment for `keygate keys ...` run from the root namespace
 * @property {(region: string) => Promise<void>} killRequestMaster SIGKILL the region's current request-state master
 * @property {(region: string) => Promise<string>} requestMaster "host:port" of the region's request-state master, as its sentinel names it
 * @property {(region: string) => Promise<string>} keystoreMaster "host:port" of the keystore master as the region's keystore sentinel names it
 * @property {(region: string, command: string[]) => Promise<unknown>} ask one command to a Redis of a region, by port name
 * @property {(keys: Array<Record<string, unknown>>) => Promise<void>} importKeys writes keys through `keygate keys import`
 * @property {(keys: Array<Record<string, unknown>>) => Promise<void>} importKeysSeparately writes keys into every region's
 *   request-state master, for startSeparateGates
 * @property {() => Promise<Instance[]>} startSeparateGates one Keygate per region on the region's own
 *   request-state master with the keys imported there: separate deployments, each region its own nonce set (the negative control)
 * @property {() => Promise<void>} stop
 */

/**
 * @param {string} host
 * @param {number} port
 */
function redisClient(host, port) {
  const c = new Redis({
    host,
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
    connectTimeout: 3_000,
    commandTimeout: 3_000,
  });
  c.on('error', () => {});
  return c;
}

/**
 * @param {string} host
 * @param {number} port
 * @param {string[]} command
 */
async function ask(host, port, command) {
  const c = redisClient(host, port);
  try {
    await c.connect();
    const [name, ...rest] = command;
    return await c.call(/** @type {string} */ (name), ...rest);
  } finally {
    c.disconnect();
  }
}

const UPSTREAM = `require('node:http').createServer((q, s) => { q.resume(); q.on('end', () => { s.setHeader('content-type', 'application/json'); s.end('{"ok":true}'); }); }).listen(${PORTS.upstream}, '127.0.0.1');`;

/**
 * Builds every region and resolves once each Keygate answers /healthz and each Redis group is in sync.
 * @param {import('./regions-net.mjs').RegionsNet} net
 * @param {{ keystoreRegion?: string, instancesPerRegion?: number, regionsOn?: boolean, env?: Record<string, string>,
 *   timeoutMs?: number }} [options] `regionsOn` (default true): Keygate with regions; false: every instance on
 *   the keystore alone, as before regions (the request state there too). `env`: more Keygate settings.
 * @returns {Promise<RegionsTopology>}
 */
export async function startRegionsTopology(net, options = {}) {
  const regions = net.regions;
  const keystoreRegion = options.keystoreRegion ?? /** @type {string} */ (regions[0]);
  const perRegion = options.instancesPerRegion ?? 2;
  const regionsOn = options.regionsOn ?? true;
  const timeoutMs = options.timeoutMs ?? 60_000;
  const dir = mkdtempSync(join(tmpdir(), 'keygate-regions-'));
  /** @type {import('node:child_process').ChildProcess[]} */
  const procs = [];
  /** @type {Map<string, import('node:child_process').ChildProcess>} */
  const redisProcs = new Map();
  /** @type {Instance[]} */
  const instances = [];
  /** @type {Instance[]} */
  const unlisted = [];
  const addr = net.address;

  /**
   * @param {string} region
   * @param {string} name
   * @param {string[]} args
   */
  const redis = (region, name, args) => {
    const log = join(dir, `${region}-${name}.log`);
    const fd = openSync(log, 'a');
    const p = net.exec(region, 'redis-server', args, { stdio: ['ignore', fd, fd] });
    closeSync(fd);
    procs.push(p);
    redisProcs.set(`${region}:${args[1]}`, p);
    return p;
  };
  /**
   * @param {string} region
   * @param {string} name
   * @param {number} port
   * @param {string[]} extra
   */
  const server = (region, name, port, extra) => {
    const d = join(dir, `${region}-${name}`);
    mkdirSync(d, { recursive: true });
    return redis(region, name, [
      '--port',
      String(port),
      '--bind',
      addr(region),
      '--protected-mode',
      'no',
      '--save',
      '',
      '--appendonly',
      'yes',
      '--dir',
      d,
      ...extra,
    ]);
  };
  /**
   * @param {string} region
   * @param {string} name
   * @param {number} port
   * @param {string[]} monitor lines after `sentinel monitor`
   */
  const sentinel = (region, name, port, monitor) => {
    const conf = join(dir, `${region}-${name}.conf`);
    writeFileSync(
      conf,
      [`port ${port}`, `bind ${addr(region)}`, 'protected-mode no', `dir ${dir}`, ...monitor, ''].join('\n'),
    );
    return redis(region, name, [conf, '--sentinel']);
  };

  const stopAll = async () => {
    await Promise.all([...instances, ...unlisted].map((i) => i.stop()));
    await Promise.all(
      procs.map(async (p) => {
        if (p.exitCode !== null || p.signalCode !== null) return;
        const exited = new Promise((r) => p.once('exit', r));
        killGroup(p, 'SIGKILL');
        await exited;
      }),
    );
    rmSync(dir, { recursive: true, force: true });
  };

  const managementToken = `kgm_${randomBytes(32).toString('base64url')}`;
  const tokensFile = join(dir, 'management-tokens.yaml');
  writeFileSync(
    tokensFile,
    `tokens:\n  - { name: regions, sha256: ${createHash('sha256').update(managementToken).digest('hex')}, access: write }\n`,
  );
  const policyFile = join(dir, 'policy.yaml');
  const routes = readFileSync(new URL('../../config/routes.yaml', import.meta.url), 'utf8');
  const regionsMap = regions
    .map((r) => `  ${r}: { sentinels: "${addr(r)}:${PORTS.requestSentinel}", sentinelName: rs-${r} }`)
    .join('\n');
  writeFileSync(policyFile, regionsOn ? `${routes}\nregions:\n${regionsMap}\n` : routes);
  const keystoreSentinels = regions.map((r) => `${addr(r)}:${PORTS.keystoreSentinel}`).join(',');
  const common = {
    KEYGATE_CONFIG: policyFile,
    KEYGATE_REDIS_URL: '',
    KEYGATE_KEYS_FILE: '',
    KEYGATE_REDIS_SENTINELS: keystoreSentinels,
    KEYGATE_REDIS_SENTINEL_NAME: KEYSTORE_NAME,
    KEYGATE_SECRET_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
    KEYGATE_LOG_LEVEL: 'warn',
    // Across links of up to 200 ms round trip on a shared machine; docs/regions.md gives the bound it makes.
    KEYGATE_REDIS_TIMEOUT_MS: String(REDIS_TIMEOUT_MS),
  };
  /** @param {string} region @returns {Record<string, string>} */
  const regionEnv = (region) =>
    regionsOn
      ? {
          KEYGATE_REGION: region,
          KEYGATE_KEYSTORE_REPLICA_URL: `redis://${addr(region)}:${PORTS.keystore}`,
          KEYGATE_KEYSTORE_MAX_STALENESS_MS: String(MAX_STALENESS_MS),
        }
      : {};

  try {
    for (const r of regions) {
      server(r, 'request-master', PORTS.requestMaster, []);
      server(r, 'request-replica', PORTS.requestReplica, ['--replicaof', addr(r), String(PORTS.requestMaster)]);
      sentinel(r, 'request-sentinel', PORTS.requestSentinel, [
        `sentinel monitor rs-${r} ${addr(r)} ${PORTS.requestMaster} 1`,
        `sentinel down-after-milliseconds rs-${r} ${SENTINEL_DOWN_AFTER_MS}`,
        `sentinel failover-timeout rs-${r} 10000`,
      ]);
      server(r, 'keystore', PORTS.keystore, [
        // On every node, so that whichever is promoted keeps it: a master that hears no replica refuses writes.
        '--min-replicas-to-write',
        '1',
        '--min-replicas-max-lag',
        '2',
        ...(r === keystoreRegion ? [] : ['--replicaof', addr(keystoreRegion), String(PORTS.keystore)]),
      ]);
    }
    for (const r of regions) {
      sentinel(r, 'keystore-sentinel', PORTS.keystoreSentinel, [
        `sentinel monitor ${KEYSTORE_NAME} ${addr(keystoreRegion)} ${PORTS.keystore} 2`,
        `sentinel down-after-milliseconds ${KEYSTORE_NAME} ${SENTINEL_DOWN_AFTER_MS}`,
        `sentinel failover-timeout ${KEYSTORE_NAME} 10000`,
      ]);
      procs.push(net.exec(r, process.execPath, ['-e', UPSTREAM]));
    }
    for (const r of regions) {
      await until(
        `request-state replica in ${r} in sync`,
        async () =>
          String(await ask(addr(r), PORTS.requestReplica, ['INFO', 'replication'])).includes('master_link_status:up'),
        timeoutMs,
      );
      if (r !== keystoreRegion)
        await until(
          `keystore replica in ${r} in sync`,
          async () =>
            String(await ask(addr(r), PORTS.keystore, ['INFO', 'replication'])).includes('master_link_status:up'),
          timeoutMs,
        );
    }
    // Every keystore sentinel knows the others (quorum 2 needs them) and every replica.
    for (const r of regions)
      await until(
        `keystore sentinel in ${r} sees ${regions.length - 1} sentinels and ${regions.length - 1} replicas`,
        async () => {
          const info = /** @type {unknown[]} */ (
            await ask(addr(r), PORTS.keystoreSentinel, ['SENTINEL', 'MASTER', KEYSTORE_NAME])
          ).map(String);
          const f = new Map();
          for (let i = 0; i + 1 < info.length; i += 2) f.set(info[i], info[i + 1]);
          return (
            Number(f.get('num-other-sentinels')) === regions.length - 1 &&
            Number(f.get('num-slaves')) === regions.length - 1
          );
        },
        timeoutMs,
      );

    /**
     * @param {string} region
     * @param {string} name
     * @param {number} slot
     * @param {Record<string, string>} env
     * @param {boolean} [listed] false: not one of `instances` (the separate deployments of the control)
     * @returns {Promise<Instance>}
     */
    const startGate = async (region, name, slot, env, listed = true) => {
      const log = join(dir, `${name}.log`);
      const fd = openSync(log, 'w');
      const p = net.exec(region, process.execPath, [KEYGATE_BIN, 'serve'], {
        stdio: ['ignore', fd, fd],
        env: childEnv('inherit', {
          ...common,
          KEYGATE_UPSTREAM: `http://127.0.0.1:${PORTS.upstream}`,
          KEYGATE_HOST: addr(region),
          KEYGATE_ADMIN_HOST: addr(region),
          KEYGATE_MANAGEMENT_HOST: addr(region),
          KEYGATE_PORT: String(PORTS.keygate + slot),
          KEYGATE_ADMIN_PORT: String(PORTS.admin + slot),
          KEYGATE_MANAGEMENT_PORT: String(PORTS.management + slot),
          KEYGATE_MANAGEMENT_TOKENS_FILE: tokensFile,
          ...env,
        }),
      });
      closeSync(fd);
      const exited = new Promise((r) => p.once('exit', r));
      const instance = {
        region,
        name,
        url: `http://${addr(region)}:${PORTS.keygate + slot}`,
        adminUrl: `http://${addr(region)}:${PORTS.admin + slot}`,
        managementUrl: `http://${addr(region)}:${PORTS.management + slot}`,
        log,
        stop: async () => {
          if (p.exitCode !== null || p.signalCode !== null) return;
          // timeout(1) passes SIGTERM on to Keygate and exits with it.
          p.kill('SIGTERM');
          const killer = setTimeout(() => killGroup(p, 'SIGKILL'), 5_000);
          await exited;
          clearTimeout(killer);
        },
      };
      (listed ? instances : unlisted).push(instance);
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        if (p.exitCode !== null || p.signalCode !== null)
          throw new Error(`${name} exited at start:\n${readFileSync(log, 'utf8').slice(-2000)}`);
        if (Date.now() > deadline)
          throw new Error(
            `${name} did not answer /healthz within ${timeoutMs} ms:\n${readFileSync(log, 'utf8').slice(-2000)}`,
          );
        const ok = await fetch(`${instance.adminUrl}/healthz`, { signal: AbortSignal.timeout(2_000) }).then(
          (r) => r.ok,
          () => false,
        );
        if (ok) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      return instance;
    };
    await Promise.all(
      regions.flatMap((r) =>
        Array.from({ length: perRegion }, (_, i) => startGate(r, `${r}-${i + 1}`, i, regionEnv(r))),
      ),
    );
    instances.sort((a, b) => a.name.localeCompare(b.name));

    const cliEnv = { ...common, ...regionEnv(keystoreRegion), KEYGATE_LOG_LEVEL: 'error' };
    /** @param {string} region @param {number} [port] @param {string} [name] */
    const sentinelMaster = async (region, port = PORTS.requestSentinel, name = `rs-${region}`) => {
      const [host, p] = /** @type {[string, string]} */ (
        await ask(addr(region), port, ['SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name])
      );
      return `${host}:${p}`;
    };
    /** @param {import('./spawn-keygate.mjs').ChildEnv} env @param {string} file */
    const importWith = async (env, file) => {
      // On a busy machine the CLI's 2 s connect timeout can pass before a niced sentinel answers: try again.
      for (let attempt = 1; ; attempt++) {
        try {
          await runKeygate(['keys', 'import', file, '--replace'], env);
          return;
        } catch (err) {
          if (attempt >= 4) throw err;
          await new Promise((r) => setTimeout(r, 1_000));
        }
      }
    };
    /**
     * "host:port" of the region's request-state master once the node its sentinel names answers (after a kill,
     * the sentinel names the dead master until it has failed over).
     * @param {string} r
     */
    const liveRequestMaster = async (r) => {
      let master = '';
      await until(
        `a live request-state master in ${r}`,
        async () => {
          master = await sentinelMaster(r);
          const [host, port] = master.split(':');
          return (await ask(/** @type {string} */ (host), Number(port), ['PING'])) === 'PONG';
        },
        timeoutMs,
      );
      return master;
    };
    const separatePolicy = () => {
      const file = join(dir, 'routes-only.yaml');
      writeFileSync(file, routes);
      return file;
    };
    const keysFile = (/** @type {Array<Record<string, unknown>>} */ keys) => {
      const file = join(dir, `keys-${randomBytes(4).toString('hex')}.json`);
      writeFileSync(file, JSON.stringify({ keys }));
      return file;
    };
    return {
      net,
      dir,
      regionsOn,
      keystoreRegion,
      instances,
      managementToken,
      cliEnv,
      requestMaster: (r) => sentinelMaster(r),
      keystoreMaster: (r) => sentinelMaster(r, PORTS.keystoreSentinel, KEYSTORE_NAME),
      killRequestMaster: async (r) => {
        const master = await sentinelMaster(r);
        const port = master.split(':')[1];
        const p = redisProcs.get(`${r}:${port}`);
        if (!p) throw new Error(`no request-state node ${master} in ${r}`);
        const exited = new Promise((res) => p.once('exit', res));
        killGroup(p, 'SIGKILL');
        await exited;
        await ask(addr(r), Number(port), ['PING']).then(
          () => {
            throw new Error(`request-state master ${master} in ${r} still answers after SIGKILL`);
          },
          () => undefined,
        );
      },
      ask: (r, command) => {
        const [portName, ...rest] = command;
        return ask(addr(r), PORTS[/** @type {keyof typeof PORTS} */ (portName)], rest);
      },
      importKeys: async (keys) => importWith(cliEnv, keysFile(keys)),
      importKeysSeparately: async (keys) => {
        const file = keysFile(keys);
        for (const r of regions)
          await importWith(
            {
              ...cliEnv,
              KEYGATE_CONFIG: separatePolicy(),
              KEYGATE_REGION: undefined,
              KEYGATE_KEYSTORE_REPLICA_URL: undefined,
              KEYGATE_REDIS_SENTINELS: '',
              KEYGATE_REDIS_SENTINEL_NAME: '',
              KEYGATE_REDIS_URL: `redis://${await liveRequestMaster(r)}`,
            },
            file,
          );
      },
      startSeparateGates: async () => {
        /** @type {Instance[]} */
        const separate = [];
        for (const r of regions) {
          const env = {
            KEYGATE_CONFIG: separatePolicy(),
            KEYGATE_REDIS_SENTINELS: '',
            KEYGATE_REDIS_SENTINEL_NAME: '',
            KEYGATE_REDIS_URL: `redis://${await liveRequestMaster(r)}`,
          };
          separate.push(await startGate(r, `${r}-separate`, perRegion, env, false));
        }
        return separate;
      },
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
