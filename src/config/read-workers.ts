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

/**
 * The most cores on which KEYGATE_WORKERS > 1 was measured and did not pay: on this project's 2-core
 * machine, 2 workers served no more requests than 1 (docs/performance.md, "Workers"), since the second
 * process has no idle core to run on. Hosts with more cores were not measured.
 */
export const WORKERS_NO_GAIN_CORES = 2;

/**
 * A warning for a worker count that cannot pay on this host (check-config prints it, serve logs it),
 * or undefined: more workers than cores, or any workers at WORKERS_NO_GAIN_CORES cores or fewer.
 */
export function workersWarning(workers: number, cores: number): string | undefined {
  if (workers <= 1) return undefined;
  const on = `KEYGATE_WORKERS=${workers} on a host with ${cores} CPU core${cores === 1 ? '' : 's'}`;
  if (cores <= WORKERS_NO_GAIN_CORES)
    return `${on}: at ${WORKERS_NO_GAIN_CORES} cores or fewer, workers were measured to serve no more requests than one process, at about twice the memory (docs/performance.md, "Workers"); use KEYGATE_WORKERS=1, or more replicas on more cores`;
  if (workers > cores)
    return `${on}: more workers than cores only adds memory and context switches; use at most ${cores}`;
  return undefined;
}
