import { availableParallelism } from 'node:os';
import { ConfigError } from '../files/config-error.js';
import { DEFAULT_ROUTES_FILE, type Policy } from '../policy/policy.js';
import { loadPolicy } from '../policy/load-policy.js';
import { readRedisSettings, type RedisConnection } from './redis-settings.js';
import { loadSecretEncryptionKeys, type SecretEncryptionKeys } from './secret-encryption.js';
import { loadManagementTokens, ManagementTokensError } from './management-tokens.js';

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
  /** Worker processes sharing the ports (KEYGATE_WORKERS; 1 = no cluster). */
  readonly workers: number;
  readonly keysFile: string | undefined;
  /**
   * Seal key secrets at rest in Redis (KEYGATE_SECRET_ENCRYPTION_KEY[_PREVIOUS]); undefined = stored plain.
   * Secret bytes, like the Redis password: describeConfig (src/cli/serve-command.ts) picks what is logged.
   */
  readonly secretEncryptionKeys: SecretEncryptionKeys | undefined;
  readonly configFile: string;
  readonly logLevel: string;
  /** The management API's listener (KEYGATE_MANAGEMENT_PORT); undefined = no listener. */
  readonly management: ManagementSettings | undefined;
  /** Allowed responses of rate-limited keys carry RateLimit-Policy/RateLimit (KEYGATE_RATE_LIMIT_HEADERS); a 429 always does. */
  readonly rateLimitHeaders: boolean;
  readonly policy: Policy;
  readonly limits: Limits;
}

export interface ManagementSettings {
  readonly host: string;
  readonly port: number;
  /** KEYGATE_MANAGEMENT_TOKENS_FILE: checked at start, reloaded when it changes. */
  readonly tokensFile: string;
}

export interface Limits {
  readonly maxTokenBytes: number;
  readonly upstreamTimeoutMs: number;
  readonly redisCommandTimeoutMs: number;
  readonly keyCacheTtlMs: number;
  readonly keyCacheNegativeTtlMs: number;
  readonly keyCacheMaxEntries: number;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly maxHeaderBytes: number;
  /** Requests in progress per process beyond which a new one is shed at once (503 overloaded). */
  readonly maxInFlight: number;
  /** More header fields than this: 431 too_many_headers. */
  readonly maxHeaderCount: number;
  /** Longest wait for a free upstream connection before 503 upstream_busy. */
  readonly upstreamQueueTimeoutMs: number;
  /** A body still arriving after bodyRateGraceMs must average at least this many bytes per second (0 = off). */
  readonly minBodyBytesPerSecond: number;
  readonly bodyRateGraceMs: number;
  readonly shutdownTimeoutMs: number;
  readonly upstreamMaxSockets: number;
}

type Env = Readonly<Record<string, string | undefined>>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Reads and checks the environment and the policy file; throws ConfigError listing every problem. */
export function loadConfig(env: Env): Config {
  const problems: string[] = [];
  const int = (name: string, def: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return def;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      problems.push(`${name}: must be an integer between ${min} and ${max}, got ${JSON.stringify(raw)}`);
      return def;
    }
    return Number(raw);
  };

  const port = int('KEYGATE_PORT', 8000, 0, 65535);
  const adminPort = int('KEYGATE_ADMIN_PORT', 9090, 0, 65535);
  if (port === adminPort && port !== 0)
    problems.push('KEYGATE_ADMIN_PORT: must differ from KEYGATE_PORT (admin endpoints never share the proxy port)');

  const management = readManagement(env, port, adminPort, problems);

  const rawMode = env.KEYGATE_MODE || 'proxy';
  if (rawMode !== 'proxy' && rawMode !== 'forward-auth')
    problems.push(`KEYGATE_MODE: "proxy" or "forward-auth", got ${JSON.stringify(rawMode)}`);
  const mode = rawMode === 'forward-auth' ? 'forward-auth' : 'proxy';
  const upstream = mode === 'proxy' ? readUpstream(env.KEYGATE_UPSTREAM, problems) : undefined;
  const forwardAuthPathPrefix = env.KEYGATE_FORWARD_AUTH_PATH_PREFIX || undefined;
  if (forwardAuthPathPrefix !== undefined) {
    if (mode !== 'forward-auth')
      problems.push('KEYGATE_FORWARD_AUTH_PATH_PREFIX: only used with KEYGATE_MODE=forward-auth');
    // A plain path without a trailing slash: Envoy puts it right before the original path, which starts with "/".
    else if (!/^(\/[A-Za-z0-9\-._~]+)+$/.test(forwardAuthPathPrefix) || /\/\.\.?(\/|$)/.test(forwardAuthPathPrefix))
      problems.push(
        `KEYGATE_FORWARD_AUTH_PATH_PREFIX: a path such as /keygate-check (segments of letters, digits, "-._~", no "." or ".." segment, no trailing "/"), got ${JSON.stringify(forwardAuthPathPrefix)}`,
      );
  }

  const redis = readRedisSettings(env, problems);
  const redisUrl = redis?.mode === 'standalone' ? redis.url : undefined;
  let workers = 1;
  const rawWorkers = env.KEYGATE_WORKERS;
  if (rawWorkers === 'auto') workers = availableParallelism();
  else if (rawWorkers && (!/^\d+$/.test(rawWorkers) || Number(rawWorkers) < 1 || Number(rawWorkers) > 256))
    problems.push(`KEYGATE_WORKERS: "auto" or an integer between 1 and 256, got ${JSON.stringify(rawWorkers)}`);
  else if (rawWorkers) workers = Number(rawWorkers);
  if (workers > 1 && !redis) {
    problems.push(
      `KEYGATE_WORKERS: ${workers} workers need Redis (KEYGATE_REDIS_URL, KEYGATE_REDIS_SENTINELS or KEYGATE_REDIS_CLUSTER_NODES); the embedded store's replay guard is per process, so a token could be replayed once per worker`,
    );
  }
  const keysFile = env.KEYGATE_KEYS_FILE || undefined;
  const secretEncryptionKeys = loadSecretEncryptionKeys(env, problems);

  const logLevel = env.KEYGATE_LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) problems.push(`KEYGATE_LOG_LEVEL: one of ${LOG_LEVELS.join(', ')}`);

  const limits: Limits = {
    maxTokenBytes: int('KEYGATE_MAX_TOKEN_BYTES', 4096, 256, 65536),
    upstreamTimeoutMs: int('KEYGATE_UPSTREAM_TIMEOUT_MS', 30_000, 1, 3_600_000),
    redisCommandTimeoutMs: int('KEYGATE_REDIS_TIMEOUT_MS', 500, 1, 60_000),
    keyCacheTtlMs: int('KEYGATE_KEY_CACHE_TTL_MS', 5_000, 0, 3_600_000),
    keyCacheNegativeTtlMs: int('KEYGATE_KEY_CACHE_NEGATIVE_TTL_MS', 1_000, 0, 60_000),
    keyCacheMaxEntries: int('KEYGATE_KEY_CACHE_MAX', 100_000, 1, 10_000_000),
    headersTimeoutMs: int('KEYGATE_HEADERS_TIMEOUT_MS', 10_000, 1, 600_000),
    requestTimeoutMs: int('KEYGATE_REQUEST_TIMEOUT_MS', 60_000, 1, 3_600_000),
    keepAliveTimeoutMs: int('KEYGATE_KEEP_ALIVE_TIMEOUT_MS', 5_000, 1, 600_000),
    maxHeaderBytes: int('KEYGATE_MAX_HEADER_BYTES', 16_384, 1024, 1_048_576),
    maxHeaderCount: int('KEYGATE_MAX_HEADER_COUNT', 100, 8, 1_000),
    maxInFlight: int('KEYGATE_MAX_IN_FLIGHT', 1_024, 1, 1_000_000),
    upstreamQueueTimeoutMs: int('KEYGATE_UPSTREAM_QUEUE_TIMEOUT_MS', 2_000, 1, 600_000),
    minBodyBytesPerSecond: int('KEYGATE_MIN_BODY_BYTES_PER_SECOND', 1_024, 0, 1_073_741_824),
    bodyRateGraceMs: int('KEYGATE_BODY_RATE_GRACE_MS', 2_000, 1, 600_000),
    shutdownTimeoutMs: int('KEYGATE_SHUTDOWN_TIMEOUT_MS', 10_000, 0, 600_000),
    upstreamMaxSockets: int('KEYGATE_UPSTREAM_MAX_SOCKETS', 256, 1, 65_536),
  };
  if (limits.headersTimeoutMs > limits.requestTimeoutMs)
    problems.push('KEYGATE_HEADERS_TIMEOUT_MS: must not exceed KEYGATE_REQUEST_TIMEOUT_MS');

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

  if (problems.length > 0) throw new ConfigError(problems);
  return deepFreeze({
    host: env.KEYGATE_HOST || '0.0.0.0',
    port,
    // Loopback unless asked: /metrics and /readyz describe the deployment and need no audience beyond the host.
    adminHost: env.KEYGATE_ADMIN_HOST || '127.0.0.1',
    adminPort,
    mode,
    upstream,
    forwardAuthPathPrefix,
    redisUrl,
    redis,
    workers,
    keysFile,
    secretEncryptionKeys,
    configFile,
    logLevel,
    rateLimitHeaders: rawRateLimitHeaders !== 'off',
    management,
    policy,
    limits,
  });
}

/**
 * The management API: off unless KEYGATE_MANAGEMENT_PORT is set, and then only with a tokens
 * file that loads (a listener nobody can authenticate to, or anybody could, is refused at start).
 */
function readManagement(env: Env, port: number, adminPort: number, problems: string[]): ManagementSettings | undefined {
  const rawPort = env.KEYGATE_MANAGEMENT_PORT;
  const tokensFile = env.KEYGATE_MANAGEMENT_TOKENS_FILE || undefined;
  if (rawPort === undefined || rawPort === '') {
    if (tokensFile)
      problems.push(
        'KEYGATE_MANAGEMENT_TOKENS_FILE: set, but KEYGATE_MANAGEMENT_PORT is not (the management API listens only on its own port)',
      );
    return undefined;
  }
  if (!/^\d+$/.test(rawPort) || Number(rawPort) > 65535) {
    problems.push(`KEYGATE_MANAGEMENT_PORT: must be an integer between 0 and 65535, got ${JSON.stringify(rawPort)}`);
    return undefined;
  }
  const mport = Number(rawPort);
  if (mport !== 0 && (mport === port || mport === adminPort))
    problems.push(
      'KEYGATE_MANAGEMENT_PORT: must differ from KEYGATE_PORT and KEYGATE_ADMIN_PORT (a NetworkPolicy admits each port to its own audience)',
    );
  if (!tokensFile) {
    problems.push(
      'KEYGATE_MANAGEMENT_TOKENS_FILE: required with KEYGATE_MANAGEMENT_PORT (the tokens allowed to call the management API)',
    );
    return undefined;
  }
  try {
    loadManagementTokens(tokensFile);
  } catch (err) {
    if (!(err instanceof ManagementTokensError)) throw err;
    problems.push(...err.problems.map((p) => `KEYGATE_MANAGEMENT_TOKENS_FILE: ${p}`));
  }
  // Loopback unless asked: the settings backend usually runs beside Keygate or reaches it through a NetworkPolicy.
  return { host: env.KEYGATE_MANAGEMENT_HOST || '127.0.0.1', port: mport, tokensFile };
}

/** Proxy mode's KEYGATE_UPSTREAM: an origin only, so the path Keygate checks is the path the upstream gets. */
function readUpstream(raw: string | undefined, problems: string[]): URL | undefined {
  if (!raw) {
    problems.push('KEYGATE_UPSTREAM: required (e.g. http://127.0.0.1:3000); not needed with KEYGATE_MODE=forward-auth');
    return undefined;
  }
  try {
    const upstream = new URL(raw);
    if (upstream.protocol !== 'http:' && upstream.protocol !== 'https:')
      problems.push('KEYGATE_UPSTREAM: must be http:// or https://');
    if (upstream.pathname !== '/' || upstream.search || upstream.hash || upstream.username || upstream.password) {
      problems.push(
        'KEYGATE_UPSTREAM: must be an origin only (scheme, host, port), so the path we check is the path the upstream gets',
      );
    }
    return upstream;
  } catch {
    problems.push(`KEYGATE_UPSTREAM: not a URL: ${JSON.stringify(raw)}`);
    return undefined;
  }
}

/**
 * Freezes plain objects and arrays, all the way down. Anything else (URL, Set,
 * Map, BlockList, the key bytes) is left as built: config holds only data, so
 * there is no live object in it that freezing could break.
 */
function deepFreeze<T>(o: T): T {
  if ((Array.isArray(o) || isPlainObject(o)) && !Object.isFrozen(o)) {
    Object.freeze(o);
    for (const v of Object.values(o)) deepFreeze(v);
  }
  return o;
}

function isPlainObject(o: unknown): o is object {
  if (typeof o !== 'object' || o === null) return false;
  const proto: unknown = Object.getPrototypeOf(o);
  return proto === Object.prototype || proto === null;
}
