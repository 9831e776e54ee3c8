import type { Logger } from 'pino';
import type { Clock } from './clock.js';
import type { Config } from './config/load-config.js';
import { loadKeysFileWithOwners } from './keys/keys-file.js';
import type { KeyRecord } from './keys/key-record.js';
import type { OwnerRecord } from './keys/owner-record.js';
import { createSecretCipher } from './keys/secret-cipher.js';
import type { Metrics } from './observe/metrics.js';
import { createMemoryStore, type MemoryStore } from './store/memory/memory-store.js';
import { createRedisStore } from './store/redis/redis-store.js';
import { createRedisClient, type RedisClient } from './store/redis/connection/redis-connection.js';
import type { RedisConnection } from './config/redis-settings.js';
import type { ReplayFence } from './store/replay-fence.js';
import type { Store } from './store/store.js';

/** What opening a store reads: a Config, or the part of one `keygate keys` reads from the environment. */
export type StoreSettings = Pick<
  Config,
  'redis' | 'secretEncryptionKeys' | 'redisDurability' | 'replayFence' | 'keysFile'
> & {
  readonly limits: Pick<Config['limits'], 'redisCommandTimeoutMs'>;
  /** Regions: `keygate serve`'s, and `keygate keys`' for the credits and usage at each key's home (`admits: false`). */
  readonly regions?: Config['regions'];
};

export interface OpenStoreDeps {
  logger: Logger;
  clock: Clock;
  metrics?: Metrics;
  fence?: ReplayFence;
  /** The keys file's records, already read (the embedded store then does not read it again). */
  keys?: readonly KeyRecord[];
  owners?: readonly OwnerRecord[];
  /** Regions: the largest recv_window the policy in force allows, in ms (the home-move cut-off). */
  maxRecvWindowMs?: () => number;
  /** false: `keygate keys`, which admits nothing and so writes no keystore heartbeat. */
  admits?: boolean;
}

/**
 * The one place a store is opened: Redis (server, Sentinel or Cluster) when configured, else the embedded
 * memory store. `keygate serve` opens it from its Config (create-keygate.ts); `keygate keys` from the same
 * environment settings (cli/keys/open-key-store.ts), without the server around it.
 */
export function createStoreFromConfig(
  config: StoreSettings & { readonly redis: NonNullable<StoreSettings['redis']> },
  deps: OpenStoreDeps,
): ReturnType<typeof createRedisStore>;
export function createStoreFromConfig(config: StoreSettings, deps: OpenStoreDeps): Store;
export function createStoreFromConfig(config: StoreSettings, deps: OpenStoreDeps): Store {
  if (config.redis) {
    // Config holds the key bytes; the live cipher is built here, with the store that uses it.
    const cipher = config.secretEncryptionKeys && createSecretCipher(config.secretEncryptionKeys);
    return createRedisStore(
      {
        connection: config.redis,
        commandTimeoutMs: config.limits.redisCommandTimeoutMs,
        ...(cipher && { cipher }),
        ...(config.redisDurability && { durability: config.redisDurability }),
        watchFailovers: config.replayFence,
        ...(config.regions && {
          regions: {
            self: config.regions.self,
            defaultHome: config.regions.defaultHome,
            groups: config.regions.groups,
            keystoreReplica: config.regions.keystoreReplica,
            maxStalenessMs: config.regions.maxStalenessMs,
            maxRecvWindowMs: deps.maxRecvWindowMs ?? (() => 3_600_000),
            ...(deps.admits === false && { admits: false }),
          },
        }),
      },
      {
        logger: deps.logger,
        clock: deps.clock,
        ...(deps.fence && { fence: deps.fence }),
        events: {
          onCommandError: (kind) => deps.metrics?.redisErrors.inc({ kind }),
          onConnectionState: (up, connection) => deps.metrics?.redisUp.set({ connection }, up ? 1 : 0),
          onServerReading: (reading, mayEvict) => {
            deps.metrics?.redisMayEvict.set(mayEvict ? 1 : 0);
            deps.metrics?.redisEvictedKeys.set(reading.evictedKeys);
          },
          onKeystoreEmptied: () => deps.metrics?.redisKeystoreEmptied.inc(),
          onRemoteAdmit: (home, seconds) => deps.metrics?.remoteAdmitSeconds.observe({ home }, seconds),
        },
      },
    );
  }
  const file = deps.keys === undefined && config.keysFile ? loadKeysFileWithOwners(config.keysFile) : undefined;
  const keys = deps.keys ?? file?.records ?? [];
  const owners = deps.owners ?? file?.owners ?? [];
  deps.logger.info(
    'embedded store: rate-limit state and key usage (lastUsedAt, per-day counts) are kept in this process only and lost on restart',
  );
  return createMemoryStore({ keys, owners }, { clock: deps.clock });
}

/** The embedded store, which create-keygate.ts reloads from the keys file. */
export function isMemoryStore(store: Store): store is MemoryStore {
  return store.kind === 'memory' && 'replaceAll' in store;
}

/**
 * The webhook delivery's own Redis connection (observe/webhook-delivery.ts): a blocking read of the audit
 * stream never holds a request's command. Opened here, beside the store, as every Redis client is.
 */
export function openWebhookRedis(connection: RedisConnection, commandTimeoutMs: number): RedisClient {
  return createRedisClient(connection, { commandTimeoutMs, connectTimeoutMs: 2_000, subscriber: false });
}
