import type { BlockList } from 'node:net';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseCidrList } from '../net/cidr.js';
import { readDataFileWithLines } from './read-data-file.js';
import { readRedisSettings, type RedisConnection } from './redis-settings.js';
import { withSchemaProblems } from './schema.js';
import { OVERRIDE_NAMES } from './method-override.js';
import { compileRouteTable, overlappingRules, type RouteTable } from './route-trie.js';
import { compileRoute, isUnderPrefix, parseMatching, showRule, type RouteMatching, type RouteRule } from './routes.js';
import { loadSecretEncryptionKeys, type SecretEncryptionKeys } from './secret-encryption.js';
import { loadManagementTokens, ManagementTokensError } from './management-tokens.js';
import { compileRateLimit, parseRateLimitSpec, type CompiledLimit } from './rate-limit-spec.js';

/** Every request under this prefix is authenticated, unless the policy lists it in `public`. */
export const API_PREFIX = '/api/v3/';
/** Served by Keygate itself (timeEndpoint, on by default), without authentication, so clients can measure their clock drift. */
export const TIME_PATH = '/api/v3/time';

export const DEFAULT_ROUTES_FILE = fileURLToPath(new URL('../../config/routes.yaml', import.meta.url));

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

/** From the routes/policy file (KEYGATE_CONFIG). */
export interface Policy {
  /** The /api/v3/ routes, compiled once (src/config/route-trie.ts). */
  readonly routes: RouteTable;
  /** Paths outside /api/v3/ forwarded without authentication, same matcher. */
  readonly publicRoutes: RouteTable;
  /**
   * The `public` entries under /api/v3/ (opt-in, none by default): forwarded without
   * authentication and without identity. Load refuses any that overlaps `routes` or
   * names no fixed segment after /api/v3/.
   */
  readonly publicApiRoutes: RouteTable;
  /** Keygate answers GET /api/v3/time itself (default); false sends that path on like any other. */
  readonly timeEndpoint: boolean;
  /** How paths are compared with patterns (caseSensitiveRoutes, trailingSlash). */
  readonly matching: RouteMatching;
  /** Override headers (lower-case) and `_method` the upstream may honour; any other is refused. */
  readonly methodOverride: ReadonlySet<string>;
  /** What to do with an authenticated request to an /api/v3/ route the file does not list. */
  readonly unlistedRoutes: 'deny' | 'allow';
  readonly trustedProxies: BlockList | null;
  readonly trustedProxyCidrs: readonly string[];
  readonly defaultRecvWindowSeconds: number;
  readonly maxRecvWindowSeconds: number;
  /** The limit of keys without their own rateLimit (undefined = such keys are not limited). */
  readonly defaultRateLimit: CompiledLimit | undefined;
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

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }
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
 * Reads and checks the policy file: first against its published schema
 * (config/schema/policy.schema.json), then what a schema cannot check (path
 * segments, CIDRs, limits against each other). Every problem is appended to
 * `problems`, each once.
 */
export function loadPolicy(file: string, problems: string[]): Policy {
  const found: string[] = [];
  let data: unknown;
  let readable = true;
  let lineOf: (at: ReadonlyArray<string | number>) => number | undefined = () => undefined;
  try {
    ({ data, lineOf } = readDataFileWithLines(file));
  } catch (err) {
    found.push(`KEYGATE_CONFIG: cannot read ${file}: ${(err as Error).message}`);
    data = {};
    readable = false;
  }
  const o = (typeof data === 'object' && data !== null ? data : {}) as Record<string, unknown>;
  // Unknown settings are the schema's to report (additionalProperties: false).
  const matching = parseMatching(o, file, found);

  const compileList = (value: unknown, name: string): Array<RouteRule & { at: string }> => {
    if (value === undefined) return [];
    if (!Array.isArray(value)) {
      found.push(`${file}: ${name} must be a list`);
      return [];
    }
    return value.flatMap((r, i) => {
      // Field problems name the entry as the schema does; the rule remembers its line too, so that
      // two routes that collide are reported with both lines.
      const rule = compileRoute(r, `${file}: ${name}[${i}]`, found);
      const line = lineOf([name, i]);
      return rule
        ? [{ ...rule, at: `${name}[${i}]`, where: `${rule.where}${line === undefined ? '' : ` (line ${line})`}` }]
        : [];
    });
  };
  const routeRules = compileList(o.routes, 'routes');
  for (const r of routeRules)
    if (!r.pattern.startsWith(API_PREFIX))
      found.push(`${file}: ${r.at}.path: route ${r.pattern} must start with /api/v3/`);
  const publicRules = compileList(o.public, 'public');
  // Read the way the upstream will: with case-insensitive matching "/API/v3/x" is under /api/v3/ too,
  // and with the trailing slash ignored so is "/api/v3". Such a route is only ever matched against /api/v3/ paths.
  const underApi = (r: RouteRule) =>
    isUnderPrefix(r.pattern, API_PREFIX, matching) ||
    isUnderPrefix(r.pattern, API_PREFIX, { ...matching, trailingSlash: 'ignore' });
  const publicApiRules = publicRules.filter(underApi);
  for (const r of publicApiRules) {
    // "/api/v3/*", "/api/v3/:x/*", "/api/v3/:x": every path of that shape, present and future, would be open.
    if (
      !r.pattern
        .split('/')
        .slice(3)
        .some((seg) => seg !== '' && seg !== '*' && !seg.startsWith(':'))
    ) {
      found.push(
        `${file}: ${r.at}.path: public route ${r.pattern} names no fixed segment after /api/v3/, so it would open every /api/v3/ path of its shape without authentication; list the public /api/v3/ routes one by one`,
      );
    }
  }
  const overlap = overlappingRules(publicApiRules, routeRules, matching);
  for (const [open, closed] of overlap.pairs) {
    found.push(
      `${open.where} (public ${showRule(open)}) and ${closed.where.slice(file.length + 2)} (authenticated ${showRule(closed)}) could both match one request: a public /api/v3/ route may not overlap a route in routes`,
    );
  }
  if (!overlap.complete)
    found.push(
      `${file}: public: too many overlapping :param and * routes to check public /api/v3/ routes against routes; simplify them`,
    );
  const routes = compileRouteTable(routeRules, matching, found);
  const publicRoutes = compileRouteTable(
    publicRules.filter((r) => !underApi(r)),
    matching,
    found,
  );
  const publicApiRoutes = compileRouteTable(publicApiRules, matching, found);

  const timeEndpoint = o.timeEndpoint ?? true;
  if (typeof timeEndpoint !== 'boolean') found.push(`${file}: timeEndpoint must be true or false`);
  else if (timeEndpoint) {
    // Keygate answers GET /api/v3/time before any route is looked up: a route naming it would never be reached.
    for (const r of [...routeRules, ...publicApiRules]) {
      if (namesTimePath(r, matching))
        found.push(
          `${file}: ${r.at}.path: ${showRule(r)} is never reached while Keygate answers GET ${TIME_PATH} itself; set timeEndpoint: false to send that path to the upstream`,
        );
    }
  }

  const overrides = o.methodOverride ?? [];
  const methodOverride = new Set<string>();
  if (
    !Array.isArray(overrides) ||
    overrides.some((n) => typeof n !== 'string' || !OVERRIDE_NAMES.includes(n.toLowerCase()))
  ) {
    found.push(`${file}: methodOverride must be a list of names among ${OVERRIDE_NAMES.join(', ')}`);
  } else {
    for (const n of overrides as string[]) methodOverride.add(n.toLowerCase());
  }

  const unlisted = o.unlistedRoutes ?? 'deny';
  if (unlisted !== 'deny' && unlisted !== 'allow') found.push(`${file}: unlistedRoutes must be "deny" or "allow"`);

  const proxies = o.trustedProxies ?? [];
  let trustedProxyCidrs: string[] = [];
  let trustedProxies: BlockList | null = null;
  if (!Array.isArray(proxies) || proxies.some((p) => typeof p !== 'string')) {
    found.push(`${file}: trustedProxies must be a list of CIDRs`);
  } else if (proxies.length > 0) {
    trustedProxyCidrs = proxies as string[];
    const parsed = parseCidrList(trustedProxyCidrs, `${file}: trustedProxies`);
    found.push(...parsed.errors);
    trustedProxies = parsed.list;
  }

  const seconds = (name: string, def: number): number => {
    const v = o[name] ?? def;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 3600) {
      found.push(`${file}: ${name} must be an integer number of seconds between 1 and 3600`);
      return def;
    }
    return v;
  };
  const defaultRecvWindowSeconds = seconds('defaultRecvWindowSeconds', 30);
  const maxRecvWindowSeconds = seconds('maxRecvWindowSeconds', 60);
  if (defaultRecvWindowSeconds > maxRecvWindowSeconds)
    found.push(`${file}: defaultRecvWindowSeconds must not exceed maxRecvWindowSeconds`);

  // `defaultRateLimit: { rate: 100/s, burst: 200 }`: the same shape as a key's own rateLimit.
  const rateLimitSpec = parseRateLimitSpec(o.defaultRateLimit, `${file}: defaultRateLimit`, found);
  problems.push(...(readable ? withSchemaProblems('policy', data, file, found) : found));
  return {
    routes,
    publicRoutes,
    publicApiRoutes,
    timeEndpoint: timeEndpoint !== false,
    matching,
    methodOverride,
    unlistedRoutes: unlisted === 'allow' ? 'allow' : 'deny',
    trustedProxies,
    trustedProxyCidrs,
    defaultRecvWindowSeconds,
    maxRecvWindowSeconds,
    defaultRateLimit: rateLimitSpec && compileRateLimit(rateLimitSpec),
  };
}

/** A GET (or HEAD) route whose pattern is the literal TIME_PATH under the policy's matching. */
function namesTimePath(r: RouteRule, matching: RouteMatching): boolean {
  if (r.methods !== '*' && !r.methods.has('GET') && !r.methods.has('HEAD')) return false;
  let p = matching.caseSensitive ? r.pattern : r.pattern.toLowerCase();
  if (matching.trailingSlash === 'ignore' && p.endsWith('/')) p = p.slice(0, -1);
  return p === TIME_PATH;
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
