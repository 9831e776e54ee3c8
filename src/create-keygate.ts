import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { systemClock, type Clock } from './clock.js';
import type { Config } from './config/load-config.js';
import { createAdminServer } from './http/admin-server.js';
import { createForwarder } from './http/forwarder.js';
import { createGateway } from './http/create-gateway.js';
import { createMetrics, type Metrics } from './observe/metrics.js';
import { createAuthenticator } from './pipeline/authenticate.js';
import { createKeyCache } from './store/key-cache.js';
import { loadKeysFile } from './store/keys-file.js';
import { createMemoryStore } from './store/memory-store.js';
import { createRedisStore } from './store/redis-store.js';
import type { Store } from './store/types.js';

export interface KeygateDeps {
  logger: Logger;
  clock?: Clock;
  metrics?: Metrics;
  /** Supply a store (tests); otherwise one is built from the config. */
  store?: Store;
}

export interface Keygate {
  readonly proxy: Server;
  readonly admin: Server;
  readonly store: Store;
  readonly metrics: Metrics;
  /** Binds both ports; resolves with the actual ports (0 in config = any free port). */
  listen(): Promise<{ port: number; adminPort: number }>;
  /** Stops accepting, lets in-flight requests finish up to the shutdown timeout, closes the store. */
  close(): Promise<void>;
}

/** Builds the store a config asks for: Redis (server, Sentinel or Cluster) when configured, else the embedded memory store. */
export function createStoreFromConfig(config: Config, deps: { logger: Logger; clock: Clock; metrics?: Metrics }): Store {
  if (config.redis) {
    return createRedisStore(
      { connection: config.redis, commandTimeoutMs: config.limits.redisCommandTimeoutMs },
      {
        logger: deps.logger,
        events: {
          onCommandError: (kind) => deps.metrics?.redisErrors.inc({ kind }),
          onConnectionState: (up) => deps.metrics?.redisUp.set(up ? 1 : 0),
        },
      },
    );
  }
  const keys = config.keysFile ? loadKeysFile(config.keysFile) : [];
  return createMemoryStore({ keys }, { clock: deps.clock });
}

export function createKeygate(config: Config, deps: KeygateDeps): Keygate {
  const clock = deps.clock ?? systemClock();
  const metrics = deps.metrics ?? createMetrics();
  const logger = deps.logger;
  const store = deps.store ?? createStoreFromConfig(config, { logger, clock, metrics });
  if (store.kind === 'memory') metrics.redisUp.remove();
  const keys = createKeyCache(
    { ttlMs: config.limits.keyCacheTtlMs, negativeTtlMs: config.limits.keyCacheNegativeTtlMs, maxEntries: config.limits.keyCacheMaxEntries },
    {
      store,
      clock,
      events: {
        onHit: () => metrics.keyCache.inc({ event: 'hit' }),
        onMiss: () => metrics.keyCache.inc({ event: 'miss' }),
        onEvict: (cause) => metrics.keyCache.inc({ event: `evict_${cause}` }),
      },
    },
  );
  const unsubscribe = store.onKeyChange(() => metrics.invalidations.inc());
  const authenticate = createAuthenticator(
    {
      maxTokenBytes: config.limits.maxTokenBytes,
      defaultRecvWindowSeconds: config.policy.defaultRecvWindowSeconds,
      maxRecvWindowSeconds: config.policy.maxRecvWindowSeconds,
    },
    { keys, store, clock },
  );
  const forwarder = createForwarder(
    { upstream: config.upstream, timeoutMs: config.limits.upstreamTimeoutMs, maxSockets: config.limits.upstreamMaxSockets },
    { logger },
  );
  const proxy = createGateway(config, { logger, clock, metrics, authenticate, forwarder });
  const admin = createAdminServer({
    metrics,
    ready: async () => {
      try {
        await store.ping();
      } catch {
        return 'store_unavailable';
      }
      return undefined;
    },
  });

  const listenOn = (server: Server, port: number, host: string) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve((server.address() as AddressInfo).port);
      });
    });

  return {
    proxy,
    admin,
    store,
    metrics,
    async listen() {
      const port = await listenOn(proxy, config.port, config.host);
      const adminPort = await listenOn(admin, config.adminPort, config.adminHost);
      return { port, adminPort };
    },
    async close() {
      const closed = new Promise<void>((resolve) => proxy.close(() => resolve()));
      proxy.closeIdleConnections();
      const deadline = new Promise<void>((resolve) => setTimeout(resolve, config.limits.shutdownTimeoutMs).unref());
      await Promise.race([closed, deadline]);
      proxy.closeAllConnections();
      admin.closeAllConnections();
      await new Promise<void>((resolve) => admin.close(() => resolve()));
      forwarder.close();
      keys.close();
      unsubscribe();
      await store.close();
    },
  };
}
