import { loadConfig, type Config } from '../../config/load-config.js';
import { ConfigError } from '../../files/config-error.js';
import { describeRedis, readRedisSettings } from '../../config/redis-settings.js';
import { describeWebhook } from '../../config/read-webhook.js';
import { KeysFileError, loadKeysFileWithOwners } from '../../keys/keys-file.js';
import type { OwnerRecord } from '../../keys/owner-record.js';
import type { KeyRecord } from '../../keys/key-record.js';
import { AssertionKeysError, loadAssertionKeys } from '../../assertion/assertion-keys.js';
import { describeTracing } from '../../config/read-tracing.js';
import { showRule } from '../../policy/routes.js';

// What `keygate serve` reads before it starts, and what `keygate check-config` checks without starting: apart
// from the server, so that check-config loads none of it.

/**
 * Loads config and (in embedded mode) the keys file; returns every problem at once, or the config
 * and the keys file's records (so the file is read once at start).
 */
export function loadStartupConfig(env: NodeJS.ProcessEnv): {
  config?: Config;
  keys?: readonly KeyRecord[];
  /** The keys file's `owners:`. */
  owners?: readonly OwnerRecord[];
  problems: string[];
} {
  const problems: string[] = [];
  let config: Config | undefined;
  let keys: readonly KeyRecord[] | undefined;
  let owners: readonly OwnerRecord[] | undefined;
  try {
    config = loadConfig(env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    problems.push(...err.problems);
  }
  const keysFile = env.KEYGATE_KEYS_FILE;
  if (keysFile && !readRedisSettings(env, [])) {
    try {
      ({ records: keys, owners } = loadKeysFileWithOwners(keysFile));
    } catch (err) {
      if (!(err instanceof KeysFileError)) throw err;
      problems.push(...err.problems.map((p) => `KEYGATE_KEYS_FILE: ${p}`));
    }
  }
  // Checked with the rest, so a bad assertion keys file is listed beside every other problem (never its key material).
  const assertionFile = env.KEYGATE_ASSERTION_KEYS_FILE;
  if (assertionFile) {
    try {
      loadAssertionKeys(assertionFile, env.KEYGATE_ASSERTION_SIGNING_KID || undefined);
    } catch (err) {
      if (!(err instanceof AssertionKeysError)) throw err;
      problems.push(...err.problems.map((p) => `KEYGATE_ASSERTION_KEYS_FILE: ${p}`));
    }
  }
  return problems.length > 0 ? { problems } : { config, ...(keys && { keys }), ...(owners && { owners }), problems };
}

/** What the startup log line shows: the effective config, secrets masked. */
export function describeConfig(config: Config): Record<string, unknown> {
  return {
    port: config.port,
    adminPort: config.adminPort,
    mode: config.mode,
    upstream: config.upstream?.origin,
    ...(config.forwardAuthPathPrefix && { forwardAuthPathPrefix: config.forwardAuthPathPrefix }),
    store: config.redis ? 'redis' : 'memory',
    redis: describeRedis(config.redis),
    ...(config.management && { managementPort: config.management.port, managementHost: config.management.host }),
    workers: config.workers,
    keysFile: config.keysFile,
    secretsAtRest: config.redis ? (config.secretEncryptionKeys ? 'aes-256-gcm' : 'plain') : undefined,
    configFile: config.configFile,
    routes: config.policy.routes.rules.length,
    publicRoutes: config.policy.publicRoutes.rules.length + config.policy.publicApiRoutes.rules.length,
    timeEndpoint: config.policy.timeEndpoint,
    routeMatching: config.policy.matching,
    methodOverride: [...config.policy.methodOverride],
    unlistedRoutes: config.policy.unlistedRoutes,
    trustedProxies: config.policy.trustedProxyCidrs,
    recvWindow: { default: config.policy.defaultRecvWindowSeconds, max: config.policy.maxRecvWindowSeconds },
    limits: config.limits,
    // Metering as written in the policy file: budgets and the routes that cost other than 1 (no key, no secret).
    metering: {
      defaultRateLimit: config.policy.defaultRateLimit?.shown ?? 'none',
      defaultOwnerRateLimit: config.policy.defaultOwnerRateLimit?.shown ?? 'none',
      failedAuthLimit: config.policy.failedAuthLimit?.shown ?? 'off',
      routeCosts: Object.fromEntries(
        config.policy.routes.rules
          .filter((r) => r.cost !== undefined && r.cost !== 1)
          .map((r) => [showRule(r), r.cost]),
      ),
    },
    // On or off, and the receiver without its credentials; never the signing secret.
    webhooks: describeWebhook(config.webhook) ?? 'off',
    // Settings only: the keys file's path, never a key (describeConfig output is logged at start).
    assertion: config.assertion && {
      keysFile: config.assertion.keysFile,
      audience: config.assertion.audience,
      issuer: config.assertion.issuer,
      ttlSeconds: config.assertion.ttlSeconds,
      mode: config.assertion.mode,
      ...(config.assertion.signingKid !== undefined && { signingKid: config.assertion.signingKid }),
    },
    // Where spans go and which are kept; the export headers by name only (they often hold a credential).
    tracing: describeTracing(config.tracing),
    // Regions: every region's request-state Redis (passwords masked), this instance's and the default home.
    ...(config.regions && {
      regions: {
        self: config.regions.self,
        defaultHome: config.regions.defaultHome,
        requestState: Object.fromEntries(config.regions.groups.map((g) => [g.name, describeRedis(g.connection)])),
        keystoreReplica: describeRedis(config.regions.keystoreReplica) ?? 'the keystore itself',
        maxStalenessMs: config.regions.maxStalenessMs,
      },
    }),
  };
}
