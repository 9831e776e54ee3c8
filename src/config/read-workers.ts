import { availableParallelism } from 'node:os';
import type { Env } from './read-env-int.js';

/**
 * KEYGATE_WORKERS: processes sharing the ports ("auto" = one per core; 1 = no cluster).
 * More than one needs Redis (`hasRedis`): the embedded store's replay guard is per process.
 */
export function readWorkers(env: Env, hasRedis: boolean, problems: string[]): number {
  let workers = 1;
  const rawWorkers = env.KEYGATE_WORKERS;
  if (rawWorkers === 'auto') workers = availableParallelism();
  else if (rawWorkers && (!/^\d+$/.test(rawWorkers) || Number(rawWorkers) < 1 || Number(rawWorkers) > 256))
    problems.push(`KEYGATE_WORKERS: "auto" or an integer between 1 and 256, got ${JSON.stringify(rawWorkers)}`);
  else if (rawWorkers) workers = Number(rawWorkers);
  if (workers > 1 && !hasRedis) {
    problems.push(
      `KEYGATE_WORKERS: ${workers} workers need Redis (KEYGATE_REDIS_URL, KEYGATE_REDIS_SENTINELS or KEYGATE_REDIS_CLUSTER_NODES); the embedded store's replay guard is per process, so a token could be replayed once per worker`,
    );
  }
  return workers;
}
