// Tested in test/e2e/regions-home.test.ts, test/e2e/regions-staleness.test.ts.
import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import type { RedisConnection } from '../../config/redis-settings.js';
import { createReplayFence, type FailoverCause, type ReplayFence } from '../replay-fence.js';
import { StoreUnavailableError } from '../store.js';
import { createRedisConnections, type RedisConnectionEvents } from './connection/redis-connections.js';
import { createDurability } from './connection/redis-durability.js';
import { createKeystoreEpoch } from './connection/keystore-epoch.js';
import { createRedisServerChecks, gated } from './connection/redis-server-checks.js';
import { createRequestState, type RequestState } from './request-state.js';
import { createIpBlockListener, type IpBlockListener } from './ip-block-listener.js';

/** One region's request-state Redis as an instance holds it (regions on: docs/regions.md). */
export interface RequestStateGroup {
  readonly name: string;
  readonly state: RequestState;
  /** This group's replay fence: raised by its own failovers and its own emptied epoch marker. */
  readonly fence: ReplayFence;
  /** Undefined when admits may run here; a promise while its settings/epoch are read; else why not. */
  refusal(): StoreUnavailableError | Promise<void> | undefined;
  /** Reads the epoch marker again (the freshness timer drives it, as the change feed's heartbeat does for one group). */
  checkEpoch(): void;
  /** The instance's own region only: blocks of the failed-authentication budget announced in this region. */
  readonly ipBlocks: IpBlockListener | undefined;
  close(): Promise<void>;
}

/**
 * A region's request-state group: its own connections (command, subscriber, key operations), its server checks
 * (noeviction), its replay fence and epoch marker, `{prefix}{regionstate}:epoch`, exactly as the one group
 * is fenced without regions (redis-store.ts), and the request state (request-state.ts) running the
 * unchanged admit there. The subscriber is used by the own region's group only (the IP block channel).
 */
export function createRequestStateGroup(
  options: {
    name: string;
    connection: RedisConnection;
    prefix: string;
    ipChannel: string;
    own: boolean;
    commandTimeoutMs?: number;
    connectTimeoutMs?: number;
    usageFlushMs?: number;
    allowEvictingRedis?: boolean;
    watchFailovers?: boolean;
  },
  deps: {
    logger: Logger;
    clock: Clock;
    events: RedisConnectionEvents;
    onFenceRaised?: (cause: FailoverCause) => void;
  },
): RequestStateGroup {
  const logger = deps.logger.child({ region: options.name });
  const fence = createReplayFence({
    clock: deps.clock,
    ...(deps.onFenceRaised && { onRaise: deps.onFenceRaised }),
  });
  const connections = createRedisConnections(
    options.connection,
    {
      ...(options.commandTimeoutMs !== undefined && { commandTimeoutMs: options.commandTimeoutMs }),
      ...(options.connectTimeoutMs !== undefined && { connectTimeoutMs: options.connectTimeoutMs }),
    },
    {
      logger,
      clock: deps.clock,
      ...(options.watchFailovers !== false && { fence }),
      events: deps.events,
      onReady: (name) => {
        if (name === 'management') return void epoch.check();
        epoch.connected();
        checks.connected();
      },
      subscriberReady: () => {
        if (options.own) connections.subscriber.subscribe(options.ipChannel).catch(() => {});
      },
      subscriberClosed: () => {},
    },
  );
  const { manager, run } = connections;
  const checks = createRedisServerChecks(
    { allowEviction: options.allowEvictingRedis ?? false, allowVolatileKeyChanges: true, minReplicas: 0 },
    { client: connections.client, run, logger },
  );
  const durability = createDurability(
    { minReplicas: 0, timeoutMs: 1_000, replyMarginMs: options.commandTimeoutMs ?? 500 },
    { client: manager },
  );
  const epoch = createKeystoreEpoch(
    { name: `${options.prefix}{regionstate}:epoch` },
    {
      client: manager,
      run,
      ensure: (keys) => durability.ensure(keys),
      logger,
      onEmptied: () => fence.raise('keystore_emptied'),
    },
  );
  const state = createRequestState(
    {
      prefix: options.prefix,
      ipChannel: options.ipChannel,
      ...(options.usageFlushMs !== undefined && { usageFlushMs: options.usageFlushMs }),
    },
    { connections, clock: deps.clock, logger },
  );
  const refusal = () => epoch.refusal() ?? checks.requestRefusal();
  const ipBlocks = options.own
    ? createIpBlockListener({ channel: options.ipChannel }, { subscriber: connections.subscriber })
    : undefined;
  return {
    name: options.name,
    state,
    fence,
    refusal,
    checkEpoch: () => void epoch.check(),
    ipBlocks,
    async close() {
      checks.stop();
      ipBlocks?.stop();
      await state.close();
      await connections.close();
    },
  };
}

/** Runs `fn` once the group allows it (its settings and epoch read), as the one group's admit is gated. */
export function gatedByGroup<T>(group: RequestStateGroup, fn: () => Promise<T>): Promise<T> {
  const r = group.refusal();
  return r === undefined ? fn() : gated(group.refusal, fn, r);
}
