// Tested in test/e2e/management-api.test.ts.
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { Limits } from '../config/read-limits.js';
import { createManagementTokensSource, type ManagementTokensSource } from './management-tokens-source.js';
import type { Store } from '../store/store.js';
import type { CompiledLimit } from '../policy/rate-limit-spec.js';
import { createKeyOperations } from '../operations/key-operations.js';
import { createOwnerOperations, type CostliestRoute } from '../operations/owner-operations.js';
import { createManagementServer } from './management-server.js';

export interface ManagementApi {
  readonly server: Server;
  /** The tokens file, reloaded on change and on SIGHUP. */
  readonly tokens: ManagementTokensSource;
}

/**
 * The management listener and what it needs: the tokens file and the key
 * operations. It shares nothing with the proxy's request path but the store: a
 * change made here is published like one from `keygate keys` (same operations,
 * same audit).
 */
export function createManagementApi(
  options: { tokensFile: string; limits: Limits },
  deps: {
    store: Store;
    logger: Logger;
    now: () => number;
    /** The policy's defaultOwnerRateLimit in force, for an owner's budget (GET /v1/owners/{owner}). */
    defaultOwnerRateLimit?: () => CompiledLimit | undefined;
    /** The policy in force's costliest route, for PUT /v1/owners/{owner}'s warnings. */
    costliestRoute?: () => CostliestRoute | undefined;
  },
): ManagementApi {
  const { store, logger, now } = deps;
  const tokens = createManagementTokensSource({ file: options.tokensFile }, { logger });
  const ops = createKeyOperations({ store, now, audit: (entry) => logger.info({ audit: entry }, 'key change') });
  const owners = createOwnerOperations({
    store,
    now,
    audit: (entry) => logger.info({ audit: entry }, 'owner change'),
    ...(deps.defaultOwnerRateLimit && { defaultOwnerRateLimit: deps.defaultOwnerRateLimit }),
    ...(deps.costliestRoute && { costliestRoute: deps.costliestRoute }),
  });
  const server = createManagementServer(
    { limits: options.limits },
    { ops, owners, store, tokens: tokens.tokens, logger, now },
  );
  return { server, tokens };
}
