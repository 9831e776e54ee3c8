import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { RedisConnection } from '../config/redis-settings.js';

/** A connection to one server, a Sentinel-managed master, or a Cluster: same command API. */
export type RedisClient = Redis | Cluster;

export interface RedisClientOptions {
  /** A command that takes longer than this fails, in ms. */
  commandTimeoutMs: number;
  /** Time allowed to establish a connection, in ms. */
  connectTimeoutMs: number;
  /**
   * true for the pub/sub connection: it may queue its SUBSCRIBE until
   * connected. Command connections never queue (fail closed and fast).
   */
  subscriber: boolean;
}

/**
 * Reconnect delay: 100, 200, 400, then every 500 ms. Short on purpose: after a
 * Sentinel failover or a Redis restart, requests get 503 until we reconnect,
 * so the lag after the server is back is at most ~0.5 s.
 */
const backoff = (times: number) => Math.min(50 * 2 ** Math.min(times, 6), 500);

/**
 * Builds an ioredis client for the configured deployment. Every mode gets the
 * same fail-fast settings: no offline queue for commands, no retries of a
 * failed command, a bounded command time, and reconnection with backoff.
 */
export function createRedisClient(conn: RedisConnection, options: RedisClientOptions): RedisClient {
  const base: RedisOptions = {
    enableOfflineQueue: options.subscriber,
    commandTimeout: options.commandTimeoutMs,
    connectTimeout: options.connectTimeoutMs,
    maxRetriesPerRequest: 0,
    autoResubscribe: true,
    enableAutoPipelining: !options.subscriber,
    lazyConnect: false,
    retryStrategy: backoff,
    // A master demoted by a failover answers writes with READONLY: drop the
    // connection so the next command goes to the new master.
    reconnectOnError: (err) => err.message.startsWith('READONLY'),
  };
  switch (conn.mode) {
    case 'standalone':
      return new Redis(conn.url, base);
    case 'sentinel':
      return new Redis({
        ...base,
        sentinels: conn.sentinels.map((s) => ({ host: s.host, port: s.port })),
        name: conn.masterName,
        role: 'master',
        ...(conn.password !== undefined && { password: conn.password }),
        // Subscribe to +switch-master on the sentinels, so a failover is
        // noticed at once rather than when the old master stops answering.
        failoverDetector: true,
        sentinelRetryStrategy: backoff,
        sentinelMaxConnections: 10,
      });
    case 'cluster': {
      const { retryStrategy: _unused, ...nodeOptions } = base;
      const clusterOptions: ClusterOptions = {
        redisOptions: { ...nodeOptions, ...(conn.password !== undefined && { password: conn.password }) },
        enableOfflineQueue: options.subscriber,
        // ioredis's ready check (CLUSTER INFO) cannot run without an offline
        // queue; a cluster that is down answers CLUSTERDOWN instead (→ 503).
        enableReadyCheck: options.subscriber,
        enableAutoPipelining: !options.subscriber,
        scaleReads: 'master',
        clusterRetryStrategy: backoff,
        retryDelayOnFailover: 100,
        retryDelayOnClusterDown: 100,
        maxRedirections: 16,
        slotsRefreshTimeout: options.connectTimeoutMs,
      };
      return new Cluster(
        conn.nodes.map((n) => ({ host: n.host, port: n.port })),
        clusterOptions,
      );
    }
  }
}
