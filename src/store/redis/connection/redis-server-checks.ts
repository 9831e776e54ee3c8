import { Cluster, type Redis } from 'ioredis';
import type { Logger } from 'pino';
import { DurabilityError, RedisMayEvictError, StoreUnavailableError } from '../../store.js';

/*
 * What Keygate needs of the Redis it is given, read from the server itself rather than
 * trusted: at connect, at every reconnect (a Sentinel failover reconnects too) and every few
 * seconds (a Cluster failover, a CONFIG SET, the evicted_keys counter).
 *
 *  - Eviction: nonces are the only names Keygate writes with a TTL, so under maxmemory with any
 *    policy but noeviction (volatile-lru is the default of ElastiCache, Azure Cache and Memorystore)
 *    Redis drops them first and a token is admitted twice. Anything but noeviction refuses every
 *    request (503, /readyz redis_may_evict) unless KEYGATE_ALLOW_EVICTING_REDIS=true.
 *  - Persistence: with no replica to wait for (KEYGATE_REDIS_MIN_REPLICAS=0) and no AOF, a key
 *    change lives in memory and in the next RDB snapshot: a crash reloads the older dump and a
 *    revoked key is active again. Such a change is answered as one no replica acknowledged
 *    (503 not_durable, exit 1) unless KEYGATE_ALLOW_VOLATILE_KEY_CHANGES=true. WAITAOF (Redis 7.2)
 *    is not used: the Redis this suite runs (7.0) has none, and it needs AOF on anyway.
 */

/** A key change that nothing makes durable: no AOF and no replica waited for. */
export class VolatileKeyChangeError extends DurabilityError {
  constructor() {
    super(0, 0);
    this.message =
      'not durable: this Redis has no AOF (appendonly no) and KEYGATE_REDIS_MIN_REPLICAS is 0, so a restart ' +
      'would reload an older snapshot without this change. Turn on appendonly yes, or wait for a replica ' +
      '(KEYGATE_REDIS_MIN_REPLICAS=1), or accept the risk with KEYGATE_ALLOW_VOLATILE_KEY_CHANGES=true';
  }
}

export interface ServerReading {
  /** maxmemory-policy; undefined when neither CONFIG GET nor INFO tells it. */
  readonly policy: string | undefined;
  /** AOF on every master that was read. */
  readonly aof: boolean;
  /** evicted_keys summed over the masters read. */
  readonly evictedKeys: number;
}

export function infoField(info: string, name: string): string | undefined {
  const m = new RegExp(`^${name}:(.*?)\\r?$`, 'm').exec(info);
  return m?.[1];
}

/** One server: CONFIG GET first; managed services disable CONFIG, and INFO memory carries the policy since Redis 4. */
export async function readServer(node: Redis): Promise<ServerReading> {
  let policy: string | undefined;
  try {
    const reply = (await node.config('GET', 'maxmemory-policy')) as string[];
    policy = reply[1];
  } catch {
    // CONFIG renamed or disabled: fall through to INFO.
  }
  const info = await node.info();
  policy ??= infoField(info, 'maxmemory_policy');
  return {
    policy,
    aof: infoField(info, 'aof_enabled') === '1',
    evictedKeys: Number(infoField(info, 'evicted_keys') ?? 0),
  };
}

/** The worst of several masters: any that may evict, any without AOF. */
export function combine(readings: readonly ServerReading[]): ServerReading {
  const policies = readings.map((r) => r.policy);
  return {
    policy: policies.includes(undefined) ? undefined : (policies.find((p) => p !== 'noeviction') ?? 'noeviction'),
    aof: readings.every((r) => r.aof),
    evictedKeys: readings.reduce((n, r) => n + r.evictedKeys, 0),
  };
}

export interface RedisServerChecksOptions {
  readonly allowEviction: boolean;
  readonly allowVolatileKeyChanges: boolean;
  /** KEYGATE_REDIS_MIN_REPLICAS: with 1 or more, a replica makes a key change durable. */
  readonly minReplicas: number;
  /** How often the settings are read again while connected, in ms (default 5,000). */
  readonly intervalMs?: number;
}

export interface RedisServerChecks {
  /** Undefined when requests may be served; a promise while the settings are being read; else why not. */
  requestRefusal(): StoreUnavailableError | Promise<void> | undefined;
  /** The same for a key change. */
  changeRefusal(): StoreUnavailableError | Promise<void> | undefined;
  /** The connection is (again) ready: nothing is served until the server has been read. */
  connected(): void;
  stop(): void;
}

export function createRedisServerChecks(
  options: RedisServerChecksOptions,
  deps: {
    client: Redis | Cluster;
    /** Runs a command under the store's deadline. */
    run: <T>(fn: () => Promise<T>) => Promise<T>;
    logger: Logger;
    onReading?: (reading: ServerReading, mayEvict: boolean) => void;
  },
): RedisServerChecks {
  let reading: ServerReading | undefined;
  let failure: StoreUnavailableError | undefined;
  let pending: Promise<void> | undefined;
  let generation = 0;
  let loggedPolicy: string | undefined;
  let loggedVolatile: boolean | undefined;

  const read = () =>
    deps.run(async () => {
      const nodes = deps.client instanceof Cluster ? deps.client.nodes('master') : [deps.client];
      return combine(await Promise.all(nodes.map(readServer)));
    });

  function note(r: ServerReading) {
    const policy = r.policy ?? 'unknown (neither CONFIG GET nor INFO memory names it)';
    const mayEvict = r.policy !== 'noeviction';
    deps.onReading?.(r, mayEvict);
    if (policy !== loggedPolicy) {
      if (mayEvict && !options.allowEviction)
        deps.logger.error(
          { maxmemoryPolicy: policy },
          `redis maxmemory-policy is ${policy}: Redis may evict nonces and a token would be admitted twice; refusing every request (503, /readyz redis_may_evict). Fix: CONFIG SET maxmemory-policy noeviction and the same in redis.conf (managed services: the parameter group's maxmemory-policy), or accept the risk with KEYGATE_ALLOW_EVICTING_REDIS=true`,
        );
      else if (mayEvict)
        deps.logger.warn(
          { maxmemoryPolicy: policy },
          `redis maxmemory-policy is ${policy} and KEYGATE_ALLOW_EVICTING_REDIS=true: an evicted nonce lets its token be admitted twice (watch keygate_redis_evicted_keys)`,
        );
      else if (loggedPolicy !== undefined)
        deps.logger.info({ maxmemoryPolicy: policy }, 'redis maxmemory-policy is noeviction');
      loggedPolicy = policy;
    }
    const volatile = !r.aof && options.minReplicas === 0;
    if (volatile !== loggedVolatile) {
      if (volatile)
        deps.logger[options.allowVolatileKeyChanges ? 'warn' : 'error'](
          { aof: false, minReplicas: 0 },
          options.allowVolatileKeyChanges
            ? 'redis has no AOF and KEYGATE_REDIS_MIN_REPLICAS is 0, and KEYGATE_ALLOW_VOLATILE_KEY_CHANGES=true: an acknowledged key change (a revoke too) is lost if Redis restarts before its next snapshot'
            : 'redis has no AOF and KEYGATE_REDIS_MIN_REPLICAS is 0: key changes answer 503 not_durable (a restart would reload an older snapshot). Fix: appendonly yes, or a replica with KEYGATE_REDIS_MIN_REPLICAS=1, or accept the risk with KEYGATE_ALLOW_VOLATILE_KEY_CHANGES=true',
        );
      loggedVolatile = volatile;
    }
  }

  function refresh(clear: boolean) {
    const g = ++generation;
    if (clear) {
      reading = undefined;
      failure = undefined;
    }
    const p = read().then(
      (r) => {
        if (g !== generation) return;
        reading = r;
        failure = undefined;
        note(r);
      },
      (err: Error) => {
        if (g !== generation || reading !== undefined) return;
        failure = new StoreUnavailableError(`redis server settings not read: ${err.message}`, { cause: err });
      },
    );
    const settled = p.finally(() => {
      if (pending === settled) pending = undefined;
    });
    pending = settled;
  }

  const timer = setInterval(() => {
    if (pending === undefined) refresh(false);
  }, options.intervalMs ?? 5_000);
  timer.unref();

  function refusal(
    verdict: (r: ServerReading) => StoreUnavailableError | undefined,
  ): StoreUnavailableError | Promise<void> | undefined {
    if (reading !== undefined) return verdict(reading);
    if (pending !== undefined) return pending;
    if (failure !== undefined) {
      // Asked again: read again (Redis may be back), and fail this call.
      const f = failure;
      refresh(true);
      return f;
    }
    refresh(true);
    return pending;
  }

  return {
    requestRefusal: () =>
      refusal((r) =>
        r.policy !== 'noeviction' && !options.allowEviction ? new RedisMayEvictError(r.policy ?? 'unknown') : undefined,
      ),
    changeRefusal: () =>
      refusal((r) =>
        !r.aof && options.minReplicas === 0 && !options.allowVolatileKeyChanges
          ? new VolatileKeyChangeError()
          : undefined,
      ),
    connected: () => refresh(true),
    stop: () => {
      generation++;
      clearInterval(timer);
    },
  };
}

/**
 * Runs `fn` once `refusal` allows: at once when it does (the request path pays one call), after
 * the settings are read when they are being read, never when it refuses. A read started again while
 * this one waited (a Cluster connects node by node, and each connection reads the settings anew) is
 * waited for too, a few times at most: each read ends within the command deadline.
 */
export function gated<T>(
  refusal: () => StoreUnavailableError | Promise<void> | undefined,
  fn: () => Promise<T>,
  // The caller's own first answer, when it asked already (admit's fast path): not asked twice.
  r: StoreUnavailableError | Promise<void> | undefined = refusal(),
  waits = 3,
): Promise<T> {
  if (r === undefined) return fn();
  if (r instanceof StoreUnavailableError) return Promise.reject(r);
  return r.then(() => {
    const again = refusal();
    if (again === undefined) return fn();
    if (again instanceof StoreUnavailableError) return Promise.reject(again);
    if (waits > 1) return gated(refusal, fn, again, waits - 1);
    return Promise.reject(new StoreUnavailableError('redis server settings not read'));
  });
}
