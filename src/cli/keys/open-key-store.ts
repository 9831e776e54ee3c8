// Tested in test/process/redis-unreachable.test.ts, test/process/keys-cli-lifecycle.test.ts, test/e2e/regions-credits.test.ts (regions).
import pino from 'pino';
import { systemClock } from '../../clock.js';
import { readRedisDurability } from '../../config/read-durability.js';
import { describeRedis, readRedisSettings } from '../../config/redis-settings.js';
import { loadSecretEncryptionKeys } from '../../config/secret-encryption.js';
import { readSecretPrefix } from '../../config/read-secret-prefix.js';
import { readRegions, type RegionSettings } from '../../config/read-regions.js';
import type { RedisConnection } from '../../config/redis-settings.js';
import { loadPolicy } from '../../policy/load-policy.js';
import { DEFAULT_ROUTES_FILE } from '../../policy/policy.js';
import { createStoreFromConfig } from '../../open-store.js';
import { REDIS_CAUSE_HINTS, type RedisCause } from '../../store/redis/connection/redis-reachability.js';
import { StoreUnavailableError, type ConnectionProblem } from '../../store/store.js';
import { waitUntilAnswers } from '../../store/wait-ready.js';
import { CliError } from '../cli-errors.js';
import type { KeyStoreHandle } from '../cli-io.js';

/**
 * How long `keygate keys` waits for Redis to answer before giving up. A person is waiting at a terminal: long
 * enough for a connect and a Sentinel lookup on a busy host, short enough that a wrong URL is reported at once
 * (it used to take 8 s and end in the client library's wording).
 */
export const CLI_REDIS_WAIT_MS = 2_000;

/**
 * Why `keygate keys` stopped, in our words: which Redis (never its password), the cause in Redis's terms as
 * /readyz gives it (redis-reachability.ts; a connection that opened and never answered is a timeout too), and
 * what to check.
 */
export function redisUnreachable(target: string, problem?: ConnectionProblem): string {
  const cause = (problem?.cause ?? 'timeout') as RedisCause;
  const hint = cause === 'other' ? (problem?.err ?? 'no detail') : (REDIS_CAUSE_HINTS[cause] ?? problem?.err);
  return (
    `Redis at ${target} did not answer within ${CLI_REDIS_WAIT_MS / 1000} s (cause: ${cause}; ${hint}). ` +
    'Check that it is running and reachable from this host, and the Redis settings this command read ' +
    '(KEYGATE_REDIS_URL, or KEYGATE_REDIS_SENTINELS + KEYGATE_REDIS_SENTINEL_NAME, or KEYGATE_REDIS_CLUSTER_NODES; ' +
    'a password in KEYGATE_REDIS_PASSWORD or the URL).'
  );
}

const NO_REDIS = `no Redis is configured (KEYGATE_REDIS_URL, KEYGATE_REDIS_SENTINELS or KEYGATE_REDIS_CLUSTER_NODES).
In embedded mode the keys file (KEYGATE_KEYS_FILE) is the source of keys:
edit it (Keygate reloads it on change and on SIGHUP). To manage keys with
this command, run Keygate with Redis.`;

/** The Redis store `keygate keys` manages, from the same settings `keygate serve` reads. */
export async function openRedisKeyStore(env: NodeJS.ProcessEnv): Promise<KeyStoreHandle> {
  const problems: string[] = [];
  const connection = readRedisSettings(env, problems);
  if (problems.length > 0) throw new CliError(`invalid Redis settings:\n  - ${problems.join('\n  - ')}`, 2);
  if (!connection) throw new CliError(NO_REDIS, 2);
  const redisDurability = readRedisDurability(env, connection, problems);
  const secretEncryptionKeys = loadSecretEncryptionKeys(env, problems);
  const secretPrefix = readSecretPrefix(env, problems);
  if (problems.length > 0) throw new CliError(problems.join('\n  '), 2);
  const regions = keyCommandRegions(env, connection);
  // The store `keygate serve` would open from this environment, opened the same way; a person waits at a
  // terminal, so a command gets 5 s, and nothing here watches for failovers (replayFence).
  const store = createStoreFromConfig(
    {
      redis: connection,
      redisDurability,
      secretEncryptionKeys,
      replayFence: false,
      keysFile: undefined,
      limits: { redisCommandTimeoutMs: 5_000 },
      ...(regions && { regions }),
    },
    { logger: pino({ level: 'silent' }), clock: systemClock(), admits: false },
  );
  try {
    // Both connections a key command uses: the first command goes over the key operations' own.
    await waitUntilAnswers(() => Promise.all([store.ping(), store.pingKeyOperations()]), CLI_REDIS_WAIT_MS, 50);
  } catch (err) {
    const problem = store.connectionProblem();
    await store.close();
    if (!(err instanceof StoreUnavailableError)) throw err;
    // The client library's own text ("Stream isn't writeable…") names none of our settings: say it ourselves.
    throw new CliError(redisUnreachable(describeRedis(connection) ?? 'the configured address', problem), 1);
  }
  return { store, encrypted: secretEncryptionKeys !== undefined, secretPrefix };
}

/**
 * Regions as `keygate serve` reads them (the policy file's `regions:`, KEYGATE_REGION), so the key operations reach
 * each region's request-state Redis: a key's credits are read, topped up and carried by a home move at its home.
 * Without KEYGATE_REGION the default home stands in (the command admits nothing, so its own region matters not).
 * A policy or regions setting that does not load: none (a home is then refused, as by keys-command.ts).
 */
function keyCommandRegions(env: NodeJS.ProcessEnv, connection: RedisConnection): RegionSettings | undefined {
  const file = env.KEYGATE_CONFIG || DEFAULT_ROUTES_FILE;
  const problems: string[] = [];
  const policy = loadPolicy(file, problems);
  if (policy.regions === undefined || problems.length > 0) return undefined;
  const region = env.KEYGATE_REGION || policy.regions.defaultHome;
  const regions = readRegions({ ...env, KEYGATE_REGION: region }, policy, connection, file, problems);
  // Reads on the keystore itself, never a replica: a command reads back what it has just written.
  return problems.length > 0 || regions === undefined ? undefined : { ...regions, keystoreReplica: undefined };
}
