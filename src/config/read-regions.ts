import type { Policy } from '../policy/policy.js';
import type { Env } from './read-env-int.js';
import { readEnvInt } from './read-env-int.js';
import { parseHostPortList, type RedisConnection } from './redis-settings.js';

/** Regions in force (docs/regions.md): read once at start from KEYGATE_REGION and the policy's `regions:`. */
export interface RegionSettings {
  /** KEYGATE_REGION: this instance's region, one listed in `groups`. */
  readonly self: string;
  /** The home of keys and owners without one of their own (the policy's defaultHome, else its first region). */
  readonly defaultHome: string;
  /** Every region's request-state Redis, by name, in the policy file's order. */
  readonly groups: ReadonlyArray<{ readonly name: string; readonly connection: RedisConnection }>;
  /** KEYGATE_KEYSTORE_REPLICA_URL: this region's keystore replica (reads and the change feed); undefined = the keystore. */
  readonly keystoreReplica: RedisConnection | undefined;
  /** KEYGATE_KEYSTORE_MAX_STALENESS_MS: the freshness bound of the keystore copy this instance reads (default 1,000). */
  readonly maxStalenessMs: number;
}

export const DEFAULT_MAX_STALENESS_MS = 1_000;

/**
 * Reads the regions settings. Without `regions:` in the policy and without KEYGATE_REGION nothing is
 * read (undefined: one region, as before); the region settings without the other half are a problem,
 * and so is a KEYGATE_REGION the map does not list (named). Every problem is pushed, none thrown.
 */
export function readRegions(
  env: Env,
  policy: Pick<Policy, 'regions'>,
  redis: RedisConnection | undefined,
  configFile: string,
  problems: string[],
): RegionSettings | undefined {
  const region = env.KEYGATE_REGION || undefined;
  const replicaUrl = env.KEYGATE_KEYSTORE_REPLICA_URL || undefined;
  const staleness = env.KEYGATE_KEYSTORE_MAX_STALENESS_MS || undefined;
  const map = policy.regions;
  if (map === undefined) {
    if (region !== undefined)
      problems.push(`KEYGATE_REGION: set to ${JSON.stringify(region)}, but ${configFile} lists no regions:`);
    for (const [name, v] of [
      ['KEYGATE_KEYSTORE_REPLICA_URL', replicaUrl],
      ['KEYGATE_KEYSTORE_MAX_STALENESS_MS', staleness],
    ] as const)
      if (v !== undefined)
        problems.push(`${name}: only used with regions (KEYGATE_REGION and regions: in ${configFile})`);
    return undefined;
  }
  const listed = map.entries.map((e) => e.name);
  if (region === undefined)
    problems.push(
      `KEYGATE_REGION: required, since ${configFile} lists regions: (${listed.join(', ')}); set it to this instance's region`,
    );
  else if (!listed.includes(region))
    problems.push(
      `KEYGATE_REGION: ${JSON.stringify(region)} is not listed under regions: in ${configFile} (listed: ${listed.join(', ')})`,
    );
  if (redis === undefined)
    problems.push(
      'regions: need the keystore in Redis (KEYGATE_REDIS_URL or KEYGATE_REDIS_SENTINELS): the embedded store is one process',
    );
  else if (redis.mode === 'cluster')
    problems.push('regions: the keystore on a Redis Cluster is not supported; use one server or a Sentinel group');
  let keystoreReplica: RedisConnection | undefined;
  if (replicaUrl !== undefined) {
    if (!/^rediss?:\/\//.test(replicaUrl))
      problems.push('KEYGATE_KEYSTORE_REPLICA_URL: must start with redis:// or rediss://');
    keystoreReplica = { mode: 'standalone', url: replicaUrl };
  }
  const maxStalenessMs = readEnvInt(
    env,
    'KEYGATE_KEYSTORE_MAX_STALENESS_MS',
    DEFAULT_MAX_STALENESS_MS,
    300,
    60_000,
    problems,
  );
  const groups = map.entries.map((e) => {
    const where = `${configFile}: regions.${e.name}.sentinels`;
    const connection: RedisConnection =
      e.sentinels !== undefined
        ? {
            mode: 'sentinel',
            sentinels: parseHostPortList(where, e.sentinels, problems),
            masterName: e.sentinelName ?? '',
            ...(e.tls === true && { tls: true }),
          }
        : { mode: 'standalone', url: e.redis ?? '' };
    return { name: e.name, connection };
  });
  return { self: region ?? '', defaultHome: map.defaultHome, groups, keystoreReplica, maxStalenessMs };
}
