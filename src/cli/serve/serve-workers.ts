import cluster, { type Worker } from 'node:cluster';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { AggregatorRegistry } from 'prom-client';
import type { Config } from '../../config/load-config.js';
import type { KeyRecord } from '../../keys/key-record.js';
import type { OwnerRecord } from '../../keys/owner-record.js';
import { createKeygate } from '../../create-keygate.js';
import { createAdminServer } from '../../observe/admin-server.js';
import { createAssertionKeysSource } from '../../assertion/assertion-keys-source.js';
import { describeRedis } from '../../config/redis-settings.js';
import { warnWhenStoreEmpty } from './empty-store-warning.js';
import { describeListenError } from './listen-error.js';

/** IPC between the primary and its workers (besides prom-client's own metrics messages). */
type NotReadyAnswer = { reason: string; cause?: string; err?: string };
type Message =
  | { type: 'keygate:listening'; port: number }
  | { type: 'keygate:readyz'; id: number; notReady?: NotReadyAnswer }
  /** The primary asks a worker how many keys the store holds (the empty-store warning); `err` when it could not tell. */
  | { type: 'keygate:count-keys'; id: number; count?: number; err?: string };

const isMessage = (m: unknown): m is Message =>
  typeof m === 'object' &&
  m !== null &&
  typeof (m as { type?: unknown }).type === 'string' &&
  (m as { type: string }).type.startsWith('keygate:');

/**
 * KEYGATE_WORKERS > 1: the primary forks that many workers (node:cluster).
 * Workers serve the proxy port (the primary hands out connections) and share
 * state only through Redis. The primary serves the admin port: /metrics sums
 * every worker's registry, /readyz asks every worker.
 */
/** `keys`: the keys file's records, already read by serve (a worker then serves them without a second read). */
export function serveWorkers(
  config: Config,
  logger: Logger,
  keys?: readonly KeyRecord[],
  owners?: readonly OwnerRecord[],
): Promise<number> {
  return cluster.isPrimary ? runPrimary(config, logger) : runWorker(config, logger, keys, owners);
}

/** Resolves with the signal's name on the first SIGTERM/SIGINT; later ones are ignored (we are already draining). */
function firstSignal(onEach?: (signal: string) => void): Promise<string> {
  return new Promise((resolve) => {
    let first = true;
    const handle = (signal: string) => {
      onEach?.(signal);
      if (first) resolve(signal);
      first = false;
    };
    process.on('SIGTERM', () => handle('SIGTERM'));
    process.on('SIGINT', () => handle('SIGINT'));
  });
}

async function runWorker(
  config: Config,
  logger: Logger,
  keys?: readonly KeyRecord[],
  owners?: readonly OwnerRecord[],
): Promise<number> {
  const keygate = createKeygate(config, { logger, ...(keys && { keys }), ...(owners && { owners }) });
  // Workers always use Redis, so SIGHUP (forwarded by the primary) reloads the policy file (and the management tokens file).
  process.on('SIGHUP', () => {
    keygate.reloadPolicy();
    if (config.management) keygate.reloadManagementTokens();
    if (config.assertion) keygate.reloadAssertionKeys();
  });
  new AggregatorRegistry(); // installs prom-client's worker-side IPC listener
  AggregatorRegistry.setRegistries([keygate.metrics.registry]);
  process.on('message', (m: unknown) => {
    if (isMessage(m) && m.type === 'keygate:count-keys')
      return void keygate.store.countKeys().then(
        (count) => process.send?.({ type: 'keygate:count-keys', id: m.id, count }),
        (err: Error) => process.send?.({ type: 'keygate:count-keys', id: m.id, err: err.message }),
      );
    if (!isMessage(m) || m.type !== 'keygate:readyz') return;
    // The same readiness as a single process: store answers, keys loaded, not draining.
    keygate.ready().then(
      (notReady) => process.send?.({ type: 'keygate:readyz', id: m.id, ...(notReady !== undefined && { notReady }) }),
      () => process.send?.({ type: 'keygate:readyz', id: m.id, notReady: { reason: 'store_unavailable' } }),
    );
  });
  const stopped = Promise.race([
    firstSignal(),
    // The primary is gone (killed hard): stop rather than serve unsupervised.
    new Promise<string>((resolve) => process.once('disconnect', () => resolve('primary disconnected'))),
  ]);
  let port: number;
  try {
    port = await new Promise<number>((resolve, reject) => {
      keygate.proxy.once('error', reject);
      keygate.proxy.listen(config.port, config.host, () => resolve((keygate.proxy.address() as AddressInfo).port));
    });
    // Every worker serves the management port too (the cluster shares it): any worker can answer a call.
    const { management } = keygate;
    if (management && config.management) {
      const at = config.management;
      await new Promise<void>((resolve, reject) => {
        management.once('error', reject);
        management.listen(at.port, at.host, () => resolve());
      });
    }
  } catch (err) {
    const message = describeListenError(err, config);
    logger.error({ err: message }, 'worker cannot listen');
    // Workers share the primary's stderr: the operator sees why next to the primary's "stopped".
    process.stderr.write(`keygate: worker ${process.pid}: ${message}\n`);
    await keygate.close().catch(() => {});
    logger.flush();
    process.disconnect?.();
    return 1;
  }
  process.send?.({ type: 'keygate:listening', port });
  const reason = await stopped;
  logger.info(
    { reason, deadlineMs: config.limits.shutdownTimeoutMs },
    'worker shutting down: draining in-flight requests',
  );
  await keygate.close().catch((err: Error) => logger.error({ err: err.message }, 'error during shutdown'));
  logger.info('worker stopped');
  logger.flush();
  // Closing the IPC channel lets the worker exit once its work is done.
  if (process.connected) process.disconnect?.();
  return 0;
}

async function runPrimary(config: Config, logger: Logger): Promise<number> {
  const aggregator = new AggregatorRegistry();
  let stopping = false;
  let proxyPort = config.port;
  const restarts: number[] = [];
  let giveUp: (reason: string) => void = () => {};
  const gaveUp = new Promise<string>((resolve) => (giveUp = resolve));

  const fork = (): Promise<Worker> =>
    new Promise((resolve, reject) => {
      const worker = cluster.fork();
      const onExit = (code: number | null, signal: string | null) =>
        reject(new Error(`worker ${worker.process.pid} exited before listening (code ${code}, signal ${signal})`));
      worker.once('exit', onExit);
      worker.on('message', (m: unknown) => {
        if (isMessage(m) && m.type === 'keygate:listening') {
          proxyPort = m.port;
          worker.off('exit', onExit);
          worker.once('exit', (code, signal) => onWorkerExit(worker, code, signal));
          resolve(worker);
        }
      });
    });

  const onWorkerExit = (worker: Worker, code: number | null, signal: string | null) => {
    if (stopping) return;
    logger.error({ workerPid: worker.process.pid, code, signal }, 'worker died; starting a replacement');
    const now = Date.now();
    restarts.push(now);
    while (restarts.length > 0 && restarts[0]! < now - 60_000) restarts.shift();
    if (restarts.length > 5) return giveUp('more than 5 worker restarts within 60 s');
    fork().catch((err: Error) => giveUp(err.message));
  };

  const live = () =>
    Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w.isConnected());
  const stopAll = async (): Promise<boolean> => {
    stopping = true;
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined);
    const exits = workers.map(
      (w) =>
        new Promise<boolean>((resolve) =>
          w.isDead() ? resolve(w.process.exitCode === 0) : w.once('exit', (code) => resolve(code === 0)),
        ),
    );
    for (const w of workers) w.process.kill('SIGTERM');
    const hardStop = setTimeout(() => {
      for (const w of workers) if (!w.isDead()) w.process.kill('SIGKILL');
    }, config.limits.shutdownTimeoutMs + 5_000);
    const results = await Promise.all(exits);
    clearTimeout(hardStop);
    return results.every(Boolean);
  };

  let nextId = 0;
  const askWorkers = async (): Promise<NotReadyAnswer | undefined> => {
    if (stopping) return { reason: 'shutting_down' };
    const workers = live();
    if (workers.length < config.workers) return { reason: 'worker_missing' };
    const answers = await Promise.all(
      workers.map(
        (w) =>
          new Promise<NotReadyAnswer | undefined>((resolve) => {
            const id = nextId++;
            const timer = setTimeout(() => done({ reason: 'worker_unresponsive' }), 2_000);
            const onMessage = (m: unknown) => {
              if (isMessage(m) && m.type === 'keygate:readyz' && m.id === id) done(m.notReady);
            };
            const done = (notReady: NotReadyAnswer | undefined) => {
              clearTimeout(timer);
              w.off('message', onMessage);
              resolve(notReady);
            };
            w.on('message', onMessage);
            w.send({ type: 'keygate:readyz', id });
          }),
      ),
    );
    return answers.find((a) => a !== undefined);
  };

  /** A worker's count of the store's keys; rejects when it cannot tell (no worker, Redis down, no answer in 5 s). */
  const countKeysOf = (w: Worker | undefined) =>
    new Promise<number>((resolve, reject) => {
      if (w === undefined) return reject(new Error('no worker'));
      const id = nextId++;
      const timer = setTimeout(() => done(undefined, 'no answer'), 5_000);
      const onMessage = (m: unknown) => {
        if (isMessage(m) && m.type === 'keygate:count-keys' && m.id === id) done(m.count, m.err);
      };
      const done = (count: number | undefined, err: string | undefined) => {
        clearTimeout(timer);
        w.off('message', onMessage);
        if (count === undefined) reject(new Error(err ?? 'no count'));
        else resolve(count);
      };
      w.on('message', onMessage);
      w.send({ type: 'keygate:count-keys', id });
    });

  const signals = firstSignal((signal) => logger.info({ signal }, 'signal received'));
  // Each worker reloads its own policy; the primary only passes the signal on (and is not stopped by it).
  // The primary serves the admin port, so it publishes the assertion keys itself (and reloads them like the workers do).
  const assertionKeys =
    config.assertion &&
    createAssertionKeysSource({ file: config.assertion.keysFile, signingKid: config.assertion.signingKid }, { logger });
  process.on('SIGHUP', () => {
    for (const w of live()) w.process.kill('SIGHUP');
    assertionKeys?.reload('reload requested');
  });
  try {
    await Promise.all(Array.from({ length: config.workers }, fork));
  } catch (err) {
    logger.error({ err: (err as Error).message }, 'a worker failed to start; stopping');
    process.stderr.write('keygate: a worker failed to start; stopped\n');
    await stopAll();
    logger.flush();
    return 1;
  }
  const admin = createAdminServer(
    { limits: config.limits },
    {
      metrics: { registry: { contentType: aggregator.contentType, metrics: () => aggregator.clusterMetrics() } },
      ready: askWorkers,
      ...(assertionKeys && { jwks: () => assertionKeys.current().jwks }),
    },
  );
  let adminPort: number;
  try {
    adminPort = await new Promise<number>((resolve, reject) => {
      admin.once('error', reject);
      admin.listen(config.adminPort, config.adminHost, () => resolve((admin.address() as AddressInfo).port));
    });
  } catch (err) {
    // The workers already serve: stop them, or the primary would wait for a signal with no admin port.
    const message = describeListenError(err, config);
    logger.error({ err: message }, 'keygate cannot start');
    process.stderr.write(`keygate: ${message}\n`);
    await stopAll();
    logger.flush();
    return 1;
  }
  logger.info({ workers: live().map((w) => w.process.pid), port: proxyPort, adminPort }, 'keygate started');
  // The empty-store warning of a single process, said once by the primary (it has no store: a worker counts).
  const stopEmptyCheck = warnWhenStoreEmpty(
    { requireKeys: config.readyRequiresKeys, where: (config.redis && describeRedis(config.redis)) ?? 'redis' },
    { store: { countKeys: () => countKeysOf(live()[0]) }, logger },
  );

  const reason = await Promise.race([signals, gaveUp]);
  const failed = !['SIGTERM', 'SIGINT'].includes(reason);
  logger.info(
    { reason, deadlineMs: config.limits.shutdownTimeoutMs },
    'shutting down: workers drain in-flight requests',
  );
  stopEmptyCheck();
  const clean = await stopAll();
  admin.closeAllConnections();
  await new Promise<void>((resolve) => admin.close(() => resolve()));
  assertionKeys?.close();
  logger.info({ clean }, 'keygate stopped');
  logger.flush();
  return failed || !clean ? 1 : 0;
}
