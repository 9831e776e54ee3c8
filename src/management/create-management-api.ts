// Tested in test/e2e/management-api.test.ts.
import type { Server } from 'node:http';
import { Registry } from 'prom-client';
import { createScanningMetrics } from '../observe/scanning-metrics.js';
import { createGithubScanningKeysSource, type GithubScanningKeysSource } from './github-scanning-source.js';
import type { Logger } from 'pino';
import type { Limits } from '../config/read-limits.js';
import { createManagementTokensSource, type ManagementTokensSource } from './management-tokens-source.js';
import type { Store } from '../store/store.js';
import type { CompiledLimit } from '../policy/rate-limit-spec.js';
import type { HomeRules } from '../operations/homes.js';
import { createKeyOperations } from '../operations/key-operations.js';
import { createAuditReader } from '../operations/audit-reader.js';
import { createOwnerOperations, type CostliestRoute } from '../operations/owner-operations.js';
import { createWebhookOperations } from '../operations/webhook-operations.js';
import { createManagementServer } from './management-server.js';

export interface ManagementApi {
  readonly server: Server;
  /** The tokens file, reloaded on change and on SIGHUP. */
  readonly tokens: ManagementTokensSource;
  /** GitHub's secret scanning keys (KEYGATE_GITHUB_SCANNING_KEYS_FILE), reloaded on change and on SIGHUP. */
  readonly scanningKeys?: GithubScanningKeysSource;
}

/**
 * The management listener and what it needs: the tokens file and the key
 * operations. It shares nothing with the proxy's request path but the store: a
 * change made here is published like one from `keygate keys` (same operations,
 * same audit).
 */
export function createManagementApi(
  options: {
    tokensFile: string;
    limits: Limits;
    secretPrefix?: string | undefined;
    /** KEYGATE_GITHUB_SCANNING_KEYS_FILE: serve POST /v1/secret-scanning/github. */
    githubScanningKeysFile?: string | undefined;
    /** Regions: the homes a key or owner may be given (operations/homes.ts); undefined = off. */
    regions?: HomeRules | undefined;
  },
  deps: {
    store: Store;
    logger: Logger;
    now: () => number;
    /** The policy's defaultOwnerRateLimit in force, for an owner's budget (GET /v1/owners/{owner}). */
    defaultOwnerRateLimit?: () => CompiledLimit | undefined;
    /** The policy in force's costliest route, for PUT /v1/owners/{owner}'s warnings. */
    costliestRoute?: () => CostliestRoute | undefined;
    /** The instance's metrics registry (the secret scanning counter); a private one when absent (tests). */
    registry?: Registry;
  },
): ManagementApi {
  const { store, logger, now } = deps;
  const tokens = createManagementTokensSource({ file: options.tokensFile }, { logger });
  const ops = createKeyOperations({
    store,
    now,
    audit: (entry) => logger.info({ audit: entry }, 'key change'),
    secretPrefix: options.secretPrefix,
    regions: options.regions,
  });
  const owners = createOwnerOperations({
    store,
    now,
    regions: options.regions,
    audit: (entry) => logger.info({ audit: entry }, 'owner change'),
    ...(deps.defaultOwnerRateLimit && { defaultOwnerRateLimit: deps.defaultOwnerRateLimit }),
    ...(deps.costliestRoute && { costliestRoute: deps.costliestRoute }),
  });
  const scanningKeys =
    options.githubScanningKeysFile !== undefined
      ? createGithubScanningKeysSource({ file: options.githubScanningKeysFile }, { logger })
      : undefined;
  const scanning = scanningKeys && {
    keys: scanningKeys.keys,
    metrics: createScanningMetrics(deps.registry ?? new Registry()),
  };
  // The memory store keeps no webhook state (webhooks need Redis): no operations, 501.
  const webhooks = createWebhookOperations({ store, now });
  const server = createManagementServer(
    { limits: options.limits },
    {
      ops,
      owners,
      store,
      tokens: tokens.tokens,
      logger,
      now,
      ...(scanning && { scanning }),
      // The memory store keeps no audit log (keys change only in the keys file): no reader, 501.
      ...(store.kind === 'redis' && { audit: createAuditReader({ store }) }),
      ...(webhooks && { webhooks }),
    },
  );
  return { server, tokens, ...(scanningKeys && { scanningKeys }) };
}

export interface ScanningApi {
  readonly server: Server;
  readonly scanningKeys: GithubScanningKeysSource;
}

/**
 * The secret scanning endpoint on a listener of its own (KEYGATE_SCANNING_PORT): GitHub's signature is
 * its only authentication, and the listener answers nothing but that one path, so it can be published to
 * GitHub without the management API and console. Reports act through the same key operations.
 */
export function createScanningApi(
  options: { keysFile: string; limits: Limits },
  deps: { store: Store; logger: Logger; now: () => number; registry?: Registry },
): ScanningApi {
  const { store, logger, now } = deps;
  const ops = createKeyOperations({ store, now, audit: (entry) => logger.info({ audit: entry }, 'key change') });
  const scanningKeys = createGithubScanningKeysSource({ file: options.keysFile }, { logger });
  const server = createManagementServer(
    { limits: options.limits, scanningOnly: true },
    {
      ops,
      store,
      // No management token is accepted here: the one route is authenticated by GitHub's signature.
      tokens: () => [],
      logger,
      now,
      scanning: { keys: scanningKeys.keys, metrics: createScanningMetrics(deps.registry ?? new Registry()) },
    },
  );
  return { server, scanningKeys };
}
