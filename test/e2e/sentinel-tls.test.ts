import { describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { createRedisClient } from '../../src/store/redis/connection/redis-connection.js';
import type { RedisConnection } from '../../src/config/redis-settings.js';

/**
 * TLS to a Sentinel group (KEYGATE_REDIS_SENTINEL_TLS, a region's `tls: true`): the option wiring only. The
 * local redis-server accepts --tls-port, but a Sentinel group over TLS with a private CA needs
 * NODE_EXTRA_CA_CERTS at process start; that end-to-end run is not in the suite (docs/regions.md).
 */
const sentinel = (tls: boolean): RedisConnection => ({
  mode: 'sentinel',
  sentinels: [{ host: '127.0.0.1', port: 1 }],
  masterName: 'state',
  ...(tls && { tls: true }),
});

describe('Sentinel over TLS: ioredis options', () => {
  const cases = [
    { name: 'tls: true → rediss to the sentinels and the nodes they name', tls: true },
    { name: 'no tls → plain TCP', tls: false },
  ];
  for (const c of cases)
    it(c.name, () => {
      const client = createRedisClient(sentinel(c.tls), {
        commandTimeoutMs: undefined,
        connectTimeoutMs: 100,
        subscriber: false,
      }) as Redis;
      client.on('error', () => {});
      try {
        const o = client.options as { enableTLSForSentinelMode?: boolean; sentinelTLS?: object; tls?: object };
        expect(o.enableTLSForSentinelMode === true).toBe(c.tls);
        expect(o.sentinelTLS !== undefined).toBe(c.tls);
        expect(o.tls !== undefined).toBe(c.tls);
      } finally {
        client.disconnect();
      }
    });
});
