import { readEnvInt, type Env } from './read-env-int.js';
import type { RedisConnection } from './redis-settings.js';

/** How durable a key change must be before it is acknowledged (src/store/redis/connection/redis-durability.ts). */
export interface RedisDurability {
  /** Replicas that must have a key change before the API answers 2xx or the CLI exits 0. */
  readonly minReplicas: number;
  /** How long to wait for them, in ms; past it the change answers 503 not_durable. */
  readonly timeoutMs: number;
  /** KEYGATE_ALLOW_EVICTING_REDIS: serve although the server's maxmemory-policy may evict nonces. */
  readonly allowEvictingRedis: boolean;
  /** KEYGATE_ALLOW_VOLATILE_KEY_CHANGES: acknowledge key changes neither AOF nor a replica keeps. */
  readonly allowVolatileKeyChanges: boolean;
}

/** "true" or "false" (default false): an operator accepting a risk says so in words. */
function readRiskFlag(env: Env, name: string, problems: string[]): boolean {
  const raw = env[name] || undefined;
  if (raw === undefined || raw === 'false') return false;
  if (raw !== 'true') problems.push(`${name}: "true" or "false", got ${JSON.stringify(raw)}`);
  return raw === 'true';
}

/**
 * KEYGATE_REDIS_MIN_REPLICAS defaults by topology: 0 for one server (KEYGATE_REDIS_URL: no
 * failover can promote a replica Keygate does not know of), 1 under Sentinel and Cluster, where
 * a failover promotes a replica and a change only the old master had is lost. A fixed number
 * rather than "every replica the master reports": that count shrinks exactly when a replica
 * drops out, which would silently lower the guarantee when it matters.
 */
export function readRedisDurability(
  env: Env,
  redis: RedisConnection | undefined,
  problems: string[],
): RedisDurability | undefined {
  const names = [
    'KEYGATE_REDIS_MIN_REPLICAS',
    'KEYGATE_REDIS_DURABILITY_TIMEOUT_MS',
    'KEYGATE_ALLOW_EVICTING_REDIS',
    'KEYGATE_ALLOW_VOLATILE_KEY_CHANGES',
  ];
  if (!redis) {
    for (const name of names)
      if (env[name]) problems.push(`${name}: only used with Redis (KEYGATE_REDIS_URL, _SENTINELS or _CLUSTER_NODES)`);
    return undefined;
  }
  const def = redis.mode === 'standalone' ? 0 : 1;
  return {
    minReplicas: readEnvInt(env, 'KEYGATE_REDIS_MIN_REPLICAS', def, 0, 16, problems),
    timeoutMs: readEnvInt(env, 'KEYGATE_REDIS_DURABILITY_TIMEOUT_MS', 1_000, 1, 60_000, problems),
    allowEvictingRedis: readRiskFlag(env, 'KEYGATE_ALLOW_EVICTING_REDIS', problems),
    allowVolatileKeyChanges: readRiskFlag(env, 'KEYGATE_ALLOW_VOLATILE_KEY_CHANGES', problems),
  };
}

/**
 * KEYGATE_REPLAY_FENCE=on|off (src/store/replay-fence.ts): after a failover, refuse every token whose
 * nonce is older than the switch. On by default under Sentinel and Cluster, where a promoted
 * replica may lack nonces the old master admitted; off for one server (a new run_id is the operator's
 * to fence: turn it on). An emptied keystore raises the fence either way (store/redis/connection/keystore-epoch.ts).
 * Only with Redis: the embedded store has no failover.
 */
export function readReplayFence(env: Env, redis: RedisConnection | undefined, problems: string[]): boolean {
  const raw = env.KEYGATE_REPLAY_FENCE || undefined;
  if (!redis) {
    if (raw !== undefined)
      problems.push('KEYGATE_REPLAY_FENCE: only used with Redis (KEYGATE_REDIS_URL, _SENTINELS or _CLUSTER_NODES)');
    return false;
  }
  if (raw === undefined) return redis.mode !== 'standalone';
  if (raw !== 'on' && raw !== 'off') problems.push(`KEYGATE_REPLAY_FENCE: "on" or "off", got ${JSON.stringify(raw)}`);
  return raw === 'on';
}
