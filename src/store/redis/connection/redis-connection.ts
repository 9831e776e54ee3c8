// Tested in test/e2e/redis-cluster.test.ts, test/e2e/redis-cluster-failover.test.ts, test/e2e/redis-sentinel-failover.test.ts.
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { RedisConnection } from '../../../config/redis-settings.js';

/** A connection to one server, a Sentinel-managed master, or a Cluster: same command API. */
export type RedisClient = Redis | Cluster;

export interface RedisClientOptions {
  /** A command that takes longer than this fails, in ms; undefined = no per-command timer (the caller bounds it). */
  commandTimeoutMs: number | undefined;
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

/** Time allowed to establish a connection (and, Cluster, to read the slot table from one node), in ms, unless set. */
export const CONNECT_TIMEOUT_MS = 2_000;

/** Cluster: how often the slot table is re-read with no timeout to prompt it, in ms. */
export const SLOTS_REFRESH_MS = 2_000;

/** Cluster: the keyless commands Keygate sends on its command connections (never auto-pipelined, see below). */
export const CLUSTER_KEYLESS_COMMANDS = ['publish', 'ping'];

/**
 * Builds an ioredis client for the configured deployment. Every mode gets the
 * same fail-fast settings: no offline queue for commands, no retries of a
 * failed command, a bounded command time, and reconnection with backoff.
 */
export function createRedisClient(conn: RedisConnection, options: RedisClientOptions): RedisClient {
  const base: RedisOptions = {
    enableOfflineQueue: options.subscriber,
    ...(options.commandTimeoutMs !== undefined && { commandTimeout: options.commandTimeoutMs }),
    connectTimeout: options.connectTimeoutMs,
    // The subscriber's SUBSCRIBE waits for a connection however long it takes (a
    // Keygate started before its Redis gave up at once and never subscribed).
    maxRetriesPerRequest: options.subscriber ? null : 0,
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
        // Not ioredis's failoverDetector: in 5.11 its +switch-master handler
        // can abort a reconnect already under way and leave the client stuck
        // for good (seen in test/e2e/redis-sentinel-failover.test.ts under load).
        // watchSentinelFailover below does the same job safely.
        failoverDetector: false,
        sentinelRetryStrategy: backoff,
        sentinelMaxConnections: 10,
        // rediss to the sentinels and to the master they name (cross-region links): Node's trusted CAs, plus
        // NODE_EXTRA_CA_CERTS for a private one.
        ...(conn.tls === true && { tls: {}, sentinelTLS: {}, enableTLSForSentinelMode: true }),
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
        // ioredis queues an auto-pipeline behind the one in flight for the same node set, which it
        // names after the slot of the command's first argument, yet sends a keyless command's
        // pipeline to a random node. A heartbeat PUBLISH sent so to a node that hangs held every
        // command of a healthy node set (the key records, a key's usage) until ioredis dropped the
        // hung connection: seconds after the failover, or not within 30 s (a revoked key kept
        // passing). Keyless commands therefore go out alone: one that hangs holds only itself.
        autoPipeliningIgnoredCommands: CLUSTER_KEYLESS_COMMANDS,
        scaleReads: 'master',
        clusterRetryStrategy: backoff,
        retryDelayOnFailover: 100,
        retryDelayOnClusterDown: 100,
        maxRedirections: 16,
        slotsRefreshTimeout: options.connectTimeoutMs,
        // A master that hangs rather than dies (frozen, swapping, a partition that drops packets)
        // closes no connection, so nothing else tells ioredis its replica took over: the slot table
        // is re-read on this period, and after every command timeout (redis-store.ts).
        slotsRefreshInterval: SLOTS_REFRESH_MS,
      };
      return new Cluster(
        conn.nodes.map((n) => ({ host: n.host, port: n.port })),
        clusterOptions,
      );
    }
  }
}

/** A server's address as a sentinel names it. */
export interface ServerAddress {
  readonly host: string;
  readonly port: number;
}

/** The new master a +switch-master message names ("<name> <old ip> <old port> <new ip> <new port>"), or undefined. */
export function switchedTo(message: string, masterName: string): ServerAddress | undefined | null {
  const [name, , , host, port] = message.split(' ');
  if (name !== masterName) return null;
  return host !== undefined && /^\d+$/.test(port ?? '') ? { host, port: Number(port) } : undefined;
}

/**
 * Whether `client` is connected to `to` right now (its socket's peer). A name that is no IP address (a sentinel
 * announcing hostnames) never matches: the caller then reconnects, which is always safe.
 */
export function connectedTo(client: RedisClient, to: ServerAddress | undefined): boolean {
  if (to === undefined || client instanceof Cluster) return false;
  const stream = client.stream as { remoteAddress?: string; remotePort?: number } | undefined;
  const peer = stream?.remoteAddress?.replace(/^::ffff:/, '');
  return peer !== undefined && peer === to.host && stream?.remotePort === to.port;
}

/**
 * Sentinel mode: subscribes to +switch-master on every sentinel and calls
 * `onSwitch` with the new master's address (undefined if the message names none)
 * when our master changes. After a planned failover the old master
 * keeps accepting writes until the sentinels demote it (seconds later), so a
 * client must not wait for its connection to break: Keygate reconnects at
 * once, or replays could slip through between the two masters.
 * Returns a function that stops watching.
 */
export function watchSentinelFailover(
  conn: Extract<RedisConnection, { mode: 'sentinel' }>,
  onSwitch: (to: ServerAddress | undefined) => void,
): () => void {
  const watchers = conn.sentinels.map((s) => {
    const w = new Redis({
      host: s.host,
      port: s.port,
      ...(conn.tls === true && { tls: {} }),
      retryStrategy: backoff,
      maxRetriesPerRequest: 0,
      autoResubscribe: true,
      connectTimeout: 2_000,
    });
    w.on('error', () => {}); // a sentinel that is down is one of several; the data connections report real trouble
    w.subscribe('+switch-master').catch(() => {});
    w.on('message', (_channel: string, message: string) => {
      const to = switchedTo(message, conn.masterName);
      if (to !== null) onSwitch(to);
    });
    return w;
  });
  return () => {
    for (const w of watchers) w.disconnect();
  };
}
