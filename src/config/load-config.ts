import { ConfigError } from '../files/config-error.js';
import { DEFAULT_ROUTES_FILE, type Policy } from '../policy/policy.js';
import { loadPolicy } from '../policy/load-policy.js';
import { deepFreeze } from './deep-freeze.js';
import type { Env } from './read-env-int.js';
import { readLimits, type Limits } from './read-limits.js';
import { readListeners } from './read-listeners.js';
import { readManagement, type ManagementSettings } from './read-management.js';
import { readUpstream } from './read-upstream.js';
import { readWorkers } from './read-workers.js';
import { readAssertion, type AssertionSettings } from './read-assertion.js';
import { readRedisSettings, type RedisConnection } from './redis-settings.js';
import { readRedisDurability, readReplayFence, type RedisDurability } from './read-durability.js';
import { readReadyRequiresKeys } from './read-readiness.js';
import { readTracing, type TracingSettings } from './read-tracing.js';
import { readWebhook, type WebhookSettings } from './read-webhook.js';
import { readSecretPrefix } from './read-secret-prefix.js';
import { readRegions, type RegionSettings } from './read-regions.js';
import { loadSecretEncryptionKeys, type SecretEncryptionKeys } from './secret-encryption.js';

/** Everything Keygate reads at start, validated once and frozen. */
export interface Config {
  readonly host: string;
  readonly port: number;
  readonly adminHost: string;
  readonly adminPort: number;
  /** KEYGATE_MODE: "proxy" forwards to the upstream; "forward-auth" only answers checks from the asking proxy. */
  readonly mode: 'proxy' | 'forward-auth';
  /** Where requests go in proxy mode; undefined in forward-auth mode (the asking proxy forwards). */
  readonly upstream: URL | undefined;
  /** Forward-auth: the prefix Envoy's ext_authz path_prefix puts before the original path (KEYGATE_FORWARD_AUTH_PATH_PREFIX). */
  readonly forwardAuthPathPrefix: string | undefined;
  /** Set only for a single Redis server (KEYGATE_REDIS_URL); see `redis` for every mode. */
  readonly redisUrl: string | undefined;
  /** The Redis deployment (server, Sentinel or Cluster); undefined = embedded memory store. */
  readonly redis: RedisConnection | undefined;
  /** Replicas a key change waits for (KEYGATE_REDIS_MIN_REPLICAS); undefined without Redis. */
  readonly redisDurability: RedisDurability | undefined;
  /** Refuse nonces older than the last Redis failover seen (KEYGATE_REPLAY_FENCE; src/store/replay-fence.ts). */
  readonly replayFence: boolean;
  /** /readyz is 503 no_keys while the store is empty (KEYGATE_READY_REQUIRES_KEYS; default false). */
  readonly readyRequiresKeys: boolean;
  /** Worker processes sharing the ports (KEYGATE_WORKERS; 1 = no cluster). */
  readonly workers: number;
  readonly keysFile: string | undefined;
  /**
   * Seal key secrets at rest in Redis (KEYGATE_SECRET_ENCRYPTION_KEY[_PREVIOUS]); undefined = stored plain.
   * Secret bytes, like the Redis password: describeConfig (src/cli/serve/serve-command.ts) picks what is logged.
   */
  readonly secretEncryptionKeys: SecretEncryptionKeys | undefined;
  /** KEYGATE_SECRET_PREFIX: the prefix of issued HS256 secrets; undefined = `kgs_` (keys/secret-format.ts). */
  readonly secretPrefix: string | undefined;
  readonly configFile: string;
  readonly logLevel: string;
  /** The management API's listener (KEYGATE_MANAGEMENT_PORT); undefined = no listener. */
  readonly management: ManagementSettings | undefined;
  /** Allowed responses of rate-limited keys carry RateLimit-Policy/RateLimit (KEYGATE_RATE_LIMIT_HEADERS); a 429 always does. */
  readonly rateLimitHeaders: boolean;
  /** The signed identity assertion (KEYGATE_ASSERTION_KEYS_FILE and its siblings); undefined = off. The key file itself is read by keys/. */
  readonly assertion: AssertionSettings | undefined;
  /** OpenTelemetry tracing (the standard OTEL_* variables); undefined = off, and its packages are never loaded. */
  readonly tracing: TracingSettings | undefined;
  /** Signed webhooks for key events (KEYGATE_WEBHOOK_URL and its siblings); undefined = off. Needs Redis. */
  readonly webhook: WebhookSettings | undefined;
  readonly policy: Policy;
  readonly limits: Limits;
  /** Regions (KEYGATE_REGION and the policy's `regions:`; docs/regions.md); undefined = one region, as before. */
  readonly regions: RegionSettings | undefined;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * Reads and checks the environment and the policy file. Each reader records its
 * problems and goes on with a default, so that one ConfigError lists every
 * problem together (in the order below); only then is the result frozen.
 */
export function loadConfig(env: Env): Config {
  const problems: string[] = [];
  const listeners = readListeners(env, problems);
  const { mode, upstream, forwardAuthPathPrefix } = readUpstream(env, problems);
  const redis = readRedisSettings(env, problems);
  const management = readManagement(env, listeners.port, listeners.adminPort, problems, redis !== undefined);
  const redisUrl = redis?.mode === 'standalone' ? redis.url : undefined;
  const redisDurability = readRedisDurability(env, redis, problems);
  const replayFence = readReplayFence(env, redis, problems);
  const workers = readWorkers(env, redis !== undefined, problems);
  const readyRequiresKeys = readReadyRequiresKeys(env, problems);
  const keysFile = env.KEYGATE_KEYS_FILE || undefined;
  const secretEncryptionKeys = loadSecretEncryptionKeys(env, problems);
  const secretPrefix = readSecretPrefix(env, problems);

  const logLevel = env.KEYGATE_LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) problems.push(`KEYGATE_LOG_LEVEL: one of ${LOG_LEVELS.join(', ')}`);
  const limits = readLimits(env, problems);
  const assertion = readAssertion(env, problems);
  const tracing = readTracing(env, problems);
  const webhook = readWebhook(env, redis, problems);
  const rawRateLimitHeaders = env.KEYGATE_RATE_LIMIT_HEADERS || 'on';
  if (rawRateLimitHeaders !== 'on' && rawRateLimitHeaders !== 'off')
    problems.push(`KEYGATE_RATE_LIMIT_HEADERS: "on" or "off", got ${JSON.stringify(rawRateLimitHeaders)}`);

  const configFile = env.KEYGATE_CONFIG || DEFAULT_ROUTES_FILE;
  const policy = loadPolicy(configFile, problems);
  // Forward-auth believes the original method and URI from request headers: only a listed proxy may send them.
  if (mode === 'forward-auth' && policy.trustedProxies === null) {
    problems.push(
      `KEYGATE_MODE=forward-auth: ${configFile} must list trustedProxies (the addresses of the proxies that ask); a check from any other peer is refused`,
    );
  }

  const regions = readRegions(env, policy, redis, configFile, problems);

  if (problems.length > 0) throw new ConfigError(problems);
  return deepFreeze({
    ...listeners,
    mode,
    upstream,
    forwardAuthPathPrefix,
    redisUrl,
    redis,
    redisDurability,
    replayFence,
    readyRequiresKeys,
    workers,
    keysFile,
    secretEncryptionKeys,
    secretPrefix,
    configFile,
    logLevel,
    rateLimitHeaders: rawRateLimitHeaders !== 'off',
    assertion,
    tracing,
    management,
    webhook,
    policy,
    limits,
    regions,
  });
}
