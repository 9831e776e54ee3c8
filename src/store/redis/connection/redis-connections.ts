// Tested in test/e2e/redis-store.test.ts, test/adversarial/redis-faults.test.ts, test/e2e/redis-outage-log.test.ts, test/e2e/failover-watch.test.ts, test/e2e/redis-sentinel-failover.test.ts.
import type { Logger } from 'pino';
import { Cluster, type Redis } from 'ioredis';
import type { Clock } from '../../../clock.js';
import type { RedisConnection } from '../../../config/redis-settings.js';
import type { ReplayFence } from '../../replay-fence.js';
import { StoreUnavailableError } from '../../store.js';
import { createDeadlineQueue } from './deadline-queue.js';
import { watchFailovers } from './failover-watch.js';
import {
  CONNECT_TIMEOUT_MS,
  connectedTo,
  createRedisClient,
  watchSentinelFailover,
  type RedisClient,
} from './redis-connection.js';
import { createRedisOutageLog } from './redis-outage-log.js';
import { createRedisReachability, type RedisReachability } from './redis-reachability.js';
import { describeRedis } from '../../../config/redis-settings.js';

export type ConnectionName = 'client' | 'subscriber' | 'management';
/** How a connection is named to onConnectionState (metrics, readiness). */
export type ConnectionLabel = 'command' | 'subscriber' | 'management';

export interface RedisConnectionEvents {
  onCommandError?: (kind: 'timeout' | 'error') => void;
  onConnectionState?: (up: boolean, connection: ConnectionLabel) => void;
}

export interface RedisConnections {
  /** The request path's commands. */
  readonly client: RedisClient;
  /** The change channel's subscription (change-feed.ts). */
  readonly subscriber: RedisClient;
  /** The key operations' own connection (management API, CLI). */
  readonly manager: RedisClient;
  /** Runs a command under the command deadline; a failure or timeout rejects with StoreUnavailableError. */
  run<T>(fn: () => Promise<T>): Promise<T>;
  /** The same deadline, with the result mapped in the deadline's one promise (the request path's admit). */
  runThen<T, R>(fn: () => Promise<T>, then: (value: T) => R): Promise<R>;
  /** The same deadline for a call answered through a callback (the nonce SET: turn-batch.ts). */
  runCallback<T, R>(
    start: (done: (err: Error | undefined, value: T) => void) => void,
    then: (value: T) => R,
  ): Promise<R>;
  readonly deadlineMs: number;
  /** An unreachable Redis in Redis's terms: the start line, /readyz's cause, whether a connection is down. */
  readonly reachability: RedisReachability;
  /** Stops the watchers and closes every connection, bounded by the command deadline. */
  close(): Promise<void>;
}

/**
 * The Redis store's three connections and what watches them:
 *  - the command client, the subscriber and the key operations' connection, each reported up and down
 *    (onConnectionState) and logged while down (redis-outage-log.ts). The subscriber's up is the change
 *    feed's to report (its subscription confirmed), so its ready and close go to `subscriber` hooks;
 *  - Sentinel's +switch-master (reconnect at once, fence raised first) and the replay fence's watch of
 *    the command connection's run_id (failover-watch.ts);
 *  - `run`, the one command deadline.
 */
export function createRedisConnections(
  connection: RedisConnection,
  options: {
    connectTimeoutMs?: number;
    commandTimeoutMs?: number;
    outageLogMs?: number;
    /** Regions: this region's keystore replica, where the command client reads and the subscriber listens. */
    readConnection?: RedisConnection;
  },
  deps: {
    logger: Logger;
    clock: Clock;
    fence?: ReplayFence;
    events: RedisConnectionEvents;
    /** A command or management connection became ready (after it was reported up). */
    onReady(name: 'client' | 'management'): void;
    subscriberReady(): void;
    subscriberClosed(): void;
  },
): RedisConnections {
  // Fail closed and fast: no queueing while disconnected, bounded commands.
  // No ioredis per-command timer: every command goes through run(), whose deadline governs
  // (see below); a second timer per command would only cost CPU on the request path.
  const clientOptions = {
    commandTimeoutMs: undefined,
    connectTimeoutMs: options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS,
  };
  const reads = options.readConnection ?? connection;
  const client = createRedisClient(reads, { ...clientOptions, subscriber: false });
  // Cluster: PUBLISH reaches every node, so one subscription on any node hears every change.
  const subscriber = createRedisClient(reads, { ...clientOptions, subscriber: true });
  // The key operations (management API, CLI) get a connection of their own: a page of keys, a
  // burst of changes or a WAIT (which blocks its connection and counts only that connection's
  // writes) then queues behind nothing of the request path's, and no admit queues behind them.
  const manager = createRedisClient(connection, { ...clientOptions, subscriber: false });
  const stopWatching =
    connection.mode === 'sentinel'
      ? watchSentinelFailover(connection, (to) => {
          // Before the reconnect: no admit may reach the new master ahead of the fence.
          if (deps.fence) {
            deps.fence.raise('switch_master');
            deps.logger.warn({ cause: 'switch_master' }, 'redis failover seen: replay fence raised');
          }
          // Only a ready connection on another server: one that is (re)connecting already asks the sentinels, and
          // one that reconnected to the new master before the message came (a sentinel names the promoted replica
          // as soon as it is promoted, and announces the switch later) is where it should be. Dropped again, it
          // refused every request (503) until it was back, after the instance had served on the new master.
          const moving = [client, subscriber, manager].filter((c) => c.status === 'ready' && !connectedTo(c, to));
          deps.logger.info(
            { newMaster: to && `${to.host}:${to.port}`, reconnecting: moving.length },
            'sentinel reports a new master; reconnecting the connections not on it',
          );
          for (const c of moving) c.disconnect(true);
        })
      : () => {};
  const events = deps.events;

  const outages = createRedisOutageLog(
    { ...(options.outageLogMs !== undefined && { intervalMs: options.outageLogMs }) },
    { logger: deps.logger, clock: deps.clock },
  );
  // The first failure before any connection was ready, named in Redis's terms; /readyz's cause.
  const reachability = createRedisReachability(
    { target: describeRedis(connection) ?? 'redis', command: 'client', subscriber: 'subscriber' },
    { logger: deps.logger },
  );
  for (const [name, conn] of [
    ['client', client],
    ['subscriber', subscriber],
    ['management', manager],
  ] as const) {
    conn.on('error', (err: Error) => {
      reachability.error(name, err);
      outages.down(name, err);
    });
    conn.on('ready', () => {
      reachability.ready(name);
      outages.up(name);
      // The subscriber is "up" only once its subscription is confirmed (change-feed.ts).
      if (name === 'subscriber') return deps.subscriberReady();
      events.onConnectionState?.(true, name === 'client' ? 'command' : name);
      deps.onReady(name);
    });
    conn.on('close', () => {
      reachability.closed(name);
      outages.down(name);
      if (name === 'subscriber') return deps.subscriberClosed();
      events.onConnectionState?.(false, name === 'client' ? 'command' : name);
    });
  }

  // The deadline starts at the end of the loop turn that made the call (deadline-queue.ts), when its
  // command has been sent, not when ioredis's own timer would start it: with auto-pipelining a command
  // waits while the previous batch is in flight (a frozen Redis answered in 2x the timeout), and a turn
  // spent on other work is not the store's time. One timer serves every call in flight
  // (deadline-queue.ts): a setTimeout + setImmediate per call showed in the profile. An
  // expired deadline is still honoured only after the loop has read what already arrived,
  // so a reply Redis sent in time is used even when Keygate was too busy to read it on time.
  const deadlineMs = options.commandTimeoutMs ?? 500;
  const deadlines = createDeadlineQueue({ deadlineMs });
  const toStoreError = (err: unknown, timedOut: boolean) => {
    if (err instanceof StoreUnavailableError) return err;
    const message = timedOut
      ? `Command timed out after ${deadlineMs} ms (deadline)`
      : ((err as Error).message ?? String(err));
    const timeout = timedOut || /timed out/i.test(message);
    events.onCommandError?.(timeout ? 'timeout' : 'error');
    // Cluster: a timeout may be a master that hangs while its replica takes over; re-read the slot
    // table now rather than at the next period (ioredis runs one refresh at a time per client).
    if (timeout) for (const c of [client, manager]) if (c instanceof Cluster) c.refreshSlotsCache();
    return new StoreUnavailableError(`redis: ${message}`, { cause: err });
  };
  const run = <T>(fn: () => Promise<T>): Promise<T> => deadlines.run(fn, toStoreError);

  const stopFence = deps.fence
    ? watchFailovers(client, deps.fence, {
        logger: deps.logger,
        // On the connection that just became ready, under the command deadline.
        runIdOf: () => run(async () => /run_id:(\w+)/.exec(await (client as Redis).info('server'))?.[1] ?? ''),
      })
    : () => {};

  return {
    client,
    subscriber,
    manager,
    run,
    runThen: (fn, then) => deadlines.run(fn, toStoreError, then),
    runCallback: (start, then) => deadlines.runCallback(start, toStoreError, then),
    deadlineMs,
    reachability,
    async close() {
      stopWatching();
      stopFence();
      const all = [client, subscriber, manager];
      outages.stop();
      // QUIT to a node that hangs is never answered (a Cluster sends it to every node): bounded.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled(all.map((c) => c.quit())),
        new Promise((r) => (timer = setTimeout(r, deadlineMs))),
      ]);
      clearTimeout(timer);
      for (const c of all) c.disconnect();
    },
  };
}
