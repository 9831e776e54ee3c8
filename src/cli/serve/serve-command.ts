// Tested in test/process/cli.test.ts, test/process/lifecycle.test.ts, test/process/workers.test.ts (keygate serve as a child process).
import { createKeygate } from '../../create-keygate.js';
import { createLogger } from '../../observe/logger.js';
import { describeRedis } from '../../config/redis-settings.js';
import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { unknownEnvProblems } from '../../config/env-names.js';
import { workersWarning } from '../../config/read-workers.js';
import { serveWorkers } from './serve-workers.js';
import { describeListenError } from './listen-error.js';
import { warnWhenSecretsPlain, warnWhenStoreEmpty } from './empty-store-warning.js';
import { packageVersion } from '../../observe/package-version.js';
import type { Command } from '../command-line.js';
import { describeConfig, loadStartupConfig } from './startup-config.js';

export const serveCommand: Command = {
  spec: {
    name: 'serve',
    summary: 'run the proxy',
    options: [],
    details: `Configured by KEYGATE_* environment variables (docs/reference/configuration.md).
Exit status: 0 after a clean shutdown (SIGTERM, SIGINT), 1 when the configuration is invalid
(every problem is listed on stderr) or a port cannot be bound (the setting is named on stderr).`,
  },
  run: (_parsed, io) => serve(io.env),
};

/** Runs Keygate until SIGTERM/SIGINT; 1 when the configuration is invalid. */
export async function serve(env: NodeJS.ProcessEnv): Promise<number> {
  const { config, keys, owners, problems } = loadStartupConfig(env);
  if (!config) {
    process.stderr.write(`keygate: invalid configuration, not starting:\n  - ${problems.join('\n  - ')}\n`);
    return 1;
  }
  const logger = createLogger({ level: config.logLevel });
  // Workers run serve() again: the primary alone warns, once per name.
  if (cluster.isPrimary) for (const problem of unknownEnvProblems(env)) logger.warn(problem);
  if (config.workers > 1) {
    const warning = cluster.isPrimary && workersWarning(config.workers, availableParallelism());
    if (warning) logger.warn(warning);
    return serveWorkers(config, logger, keys, owners);
  }
  if (!config.redis && !config.keysFile)
    logger.warn('no KEYGATE_KEYS_FILE and no KEYGATE_REDIS_URL: no keys are loaded, every token will get 10013');
  const keygate = createKeygate(config, { logger, ...(keys && { keys }), ...(owners && { owners }) });
  let ports: Awaited<ReturnType<typeof keygate.listen>>;
  try {
    ports = await keygate.listen();
  } catch (err) {
    // Nothing else keeps a half-started Keygate alive: close what was opened (store, watchers) and exit 1.
    const message = describeListenError(err, config);
    logger.error({ err: message }, 'keygate cannot start');
    process.stderr.write(`keygate: ${message}\n`);
    await keygate.close().catch(() => {});
    logger.flush();
    return 1;
  }
  const { port, adminPort, managementPort, scanningPort } = ports;
  logger.info(
    {
      version: packageVersion(),
      config: {
        ...describeConfig(config),
        port,
        adminPort,
        ...(managementPort !== undefined && { managementPort }),
        ...(scanningPort !== undefined && { scanningPort }),
      },
    },
    'keygate started',
  );
  // No keys file and no Redis is warned about above; otherwise an empty store is said once it answers.
  const stopEmptyCheck =
    config.redis || config.keysFile
      ? warnWhenStoreEmpty(
          {
            requireKeys: config.readyRequiresKeys,
            where: config.redis ? (describeRedis(config.redis) ?? 'redis') : `KEYGATE_KEYS_FILE ${config.keysFile}`,
          },
          { store: keygate.store, logger },
        )
      : () => {};
  // Redis without an encryption key stores secrets as written: said once the store answers, with how many keys
  // hold one and the fix (a key written later is warned about by the command that writes it).
  const stopPlainCheck =
    config.redis && !config.secretEncryptionKeys
      ? warnWhenSecretsPlain({ where: describeRedis(config.redis) ?? 'redis' }, { store: keygate.store, logger })
      : () => {};

  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      logger.info(
        { signal, deadlineMs: config.limits.shutdownTimeoutMs },
        'shutting down: draining in-flight requests',
      );
      process.off('SIGTERM', onTerm);
      process.off('SIGINT', onInt);
      stopEmptyCheck();
      stopPlainCheck();
      keygate.close().then(resolve, (err: Error) => {
        logger.error({ err: err.message }, 'error during shutdown');
        resolve();
      });
    };
    const onTerm = () => stop('SIGTERM');
    const onInt = () => stop('SIGINT');
    process.on('SIGTERM', onTerm);
    process.on('SIGINT', onInt);
    process.on('SIGHUP', () => {
      keygate.reloadPolicy();
      if (config.management || config.scanning) keygate.reloadManagementTokens();
      if (config.keysFile && !config.redis) void keygate.reloadKeys();
      if (config.assertion) keygate.reloadAssertionKeys();
      // Say exactly what SIGHUP re-read; each file's own "loaded"/"rejected" line says how it went.
      const reloaded = [
        'policy file',
        ...(config.management ? ['management tokens file'] : []),
        ...(config.scanning || config.management?.githubScanningKeysFile ? ['GitHub secret scanning keys file'] : []),
        ...(config.keysFile && !config.redis ? ['keys file'] : []),
        ...(config.assertion ? ['assertion keys file'] : []),
      ];
      const keys = config.redis ? 'from Redis: changes arrive by pub/sub, nothing to re-read' : undefined;
      logger.info({ reloaded, ...(keys && { keys }) }, `SIGHUP: reloaded the ${reloaded.join(', ')}`);
    });
  });
  logger.info('keygate stopped');
  logger.flush();
  return 0;
}
