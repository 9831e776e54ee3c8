// Tested in test/process/workers.test.ts.
import cluster from 'node:cluster';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { AggregatorRegistry } from 'prom-client';
import type { Config } from '../../config/load-config.js';
import type { KeyRecord } from '../../keys/key-record.js';
import type { OwnerRecord } from '../../keys/owner-record.js';
import { createKeygate } from '../../create-keygate.js';
import { createAssertionKeysSource, type AssertionKeysSource } from '../../assertion/assertion-keys-source.js';
import { describeRedis } from '../../config/redis-settings.js';
import { warnWhenStoreEmpty } from './empty-store-warning.js';
import { describeListenError } from './listen-error.js';
import { createPrimaryAdmin } from './primary-admin.js';
import { isMessage } from './worker-messages.js';
import { streamsCountedByPrimary } from './worker-streams.js';
import { createWorkerSupervisor, type WorkerSupervisor } from './worker-supervisor.js';

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
  const keygate = createKeygate(config, {
    logger,
    ...(keys && { keys }),
    ...(owners && { owners }),
    sharedStreams: streamsCountedByPrimary(),
  });
  // Workers always use Redis, so SIGHUP (forwarded by the primary) reloads the policy file (and the management tokens file).
  process.on('SIGHUP', () => {
    keygate.reloadPolicy();
    if (config.management || config.scanning) keygate.reloadManagementTokens();
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
    // The secret scanning listener likewise, when it has a port of its own.
    const { scanning } = keygate;
    if (scanning && config.scanning) {
      const at = config.scanning;
      await new Promise<void>((resolve, reject) => {
        scanning.once('error', reject);
        scanning.listen(at.port, at.host, () => resolve());
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

/**
 * The primary: starts the workers, serves the admin port for them, passes SIGHUP on, and on SIGTERM/SIGINT (or
 * when the workers die too often) stops them all.
 */
async function runPrimary(config: Config, logger: Logger): Promise<number> {
  const supervisor = createWorkerSupervisor(
    {
      workers: config.workers,
      port: config.port,
      shutdownTimeoutMs: config.limits.shutdownTimeoutMs,
      maxStreamsPerKey: config.limits.maxStreamsPerKey,
    },
    { logger },
  );
  const signals = firstSignal((signal) => logger.info({ signal }, 'signal received'));
  // Each worker reloads its own policy; the primary only passes the signal on (and is not stopped by it).
  // The primary serves the admin port, so it publishes the assertion keys itself (and reloads them like the workers do).
  const assertionKeys =
    config.assertion &&
    createAssertionKeysSource({ file: config.assertion.keysFile, signingKid: config.assertion.signingKid }, { logger });
  process.on('SIGHUP', () => {
    for (const w of supervisor.live()) w.process.kill('SIGHUP');
    assertionKeys?.reload('reload requested');
  });
  const admin = createPrimaryAdmin(config, {
    supervisor,
    ...(assertionKeys && { jwks: () => assertionKeys.current().jwks }),
  });
  const stop = () => shutDown({ supervisor, admin: admin.server, assertionKeys });

  try {
    await supervisor.start();
  } catch (err) {
    logger.error({ err: (err as Error).message }, 'a worker failed to start; stopping');
    process.stderr.write('keygate: a worker failed to start; stopped\n');
    await stop();
    logger.flush();
    return 1;
  }
  let adminPort: number;
  try {
    adminPort = await new Promise<number>((resolve, reject) => {
      admin.server.once('error', reject);
      admin.server.listen(config.adminPort, config.adminHost, () =>
        resolve((admin.server.address() as AddressInfo).port),
      );
    });
  } catch (err) {
    // The workers already serve: stop them, or the primary would wait for a signal with no admin port.
    const message = describeListenError(err, config);
    logger.error({ err: message }, 'keygate cannot start');
    process.stderr.write(`keygate: ${message}\n`);
    await stop();
    logger.flush();
    return 1;
  }
  logger.info(
    { workers: supervisor.live().map((w) => w.process.pid), port: supervisor.proxyPort(), adminPort },
    'keygate started',
  );
  // The empty-store warning of a single process, said once by the primary (it has no store: a worker counts).
  const stopEmptyCheck = warnWhenStoreEmpty(
    { requireKeys: config.readyRequiresKeys, where: (config.redis && describeRedis(config.redis)) ?? 'redis' },
    { store: { countKeys: admin.countKeys }, logger },
  );

  const reason = await Promise.race([signals, supervisor.gaveUp]);
  const failed = !['SIGTERM', 'SIGINT'].includes(reason);
  logger.info(
    { reason, deadlineMs: config.limits.shutdownTimeoutMs },
    'shutting down: workers drain in-flight requests',
  );
  stopEmptyCheck();
  const clean = await stop();
  logger.info({ clean }, 'keygate stopped');
  logger.flush();
  return failed || !clean ? 1 : 0;
}

/** Stops the workers (each drains its in-flight requests), then the admin port and the assertion keys' watch; true when every worker exited 0. */
async function shutDown(parts: {
  supervisor: WorkerSupervisor;
  admin: Server;
  assertionKeys: AssertionKeysSource | undefined;
}): Promise<boolean> {
  const clean = await parts.supervisor.stopAll();
  const { admin } = parts;
  if (admin.listening) {
    admin.closeAllConnections();
    await new Promise<void>((resolve) => admin.close(() => resolve()));
  }
  parts.assertionKeys?.close();
  return clean;
}
