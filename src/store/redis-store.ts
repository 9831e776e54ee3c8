import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { systemClock, type Clock } from '../clock.js';
import type { RedisConnection } from '../config/redis-settings.js';
import { ADMIT_SCRIPT } from './admit-script.js';
import { createDurability } from './redis-durability.js';
import { createDeadlineQueue } from './deadline-queue.js';
import { CONNECT_TIMEOUT_MS, createRedisClient, watchSentinelFailover, type RedisClient } from './redis-connection.js';
import { Cluster, type Redis } from 'ioredis';
import { createUsageWriter } from './usage-writer.js';
import { parseUsageHash, USAGE_FLUSH_SCRIPT } from './usage-flush-script.js';
import { parseAdmissionReply, parseNonceReply } from './admission-reply.js';
import type { SecretCipher } from '../keys/secret-cipher.js';
import { createRedisKeyRecords } from './redis-key-records.js';
import { createRedisOutageLog } from './redis-outage-log.js';
import { createKnownKeys, type KnownKeys } from './known-keys.js';
import { createTurnSend } from './turn-batch.js';
import { watchFailovers } from './failover-watch.js';
import { HEARTBEAT_MISSES, HEARTBEAT_MS, startSubscriberHeartbeat } from './subscriber-heartbeat.js';
import type { ReplayFence } from './replay-fence.js';
import { createRedisServerChecks, gated, type ServerReading } from './redis-server-checks.js';
import { StoreUnavailableError, type Admission, type KeyChangeListener, type Store } from './store.js';

export interface RedisStoreOptions {
  /** A single server. Give either `url` or `connection`. */
  url?: string;
  /** A single server, a Sentinel-managed master or a Cluster. */
  connection?: RedisConnection;
  /** Prefix of every Redis key and channel this store uses. */
  prefix?: string;
  /** A command that takes longer than this fails (→ 503), in ms. */
  commandTimeoutMs?: number;
  /** Time allowed to establish a connection, in ms. */
  connectTimeoutMs?: number;
  /** Encrypts secrets at rest (KEYGATE_SECRET_ENCRYPTION_KEY); plain JSON without it. */
  cipher?: SecretCipher;
  /** Replicas a key change waits for (WAIT) before it resolves; none when unset or 0. */
  durability?: {
    minReplicas: number;
    timeoutMs: number;
    /** Serve although the server may evict nonces (redis-server-checks.ts). */
    allowEvictingRedis?: boolean;
    /** Acknowledge key changes although neither AOF nor a replica keeps them (redis-server-checks.ts). */
    allowVolatileKeyChanges?: boolean;
  };
  /** How often usage counted in this process is written to Redis, in ms (default 1,000). */
  usageFlushMs?: number;
  /** How often a connection that stays down is logged again, in ms (default REDIS_OUTAGE_LOG_INTERVAL_MS). */
  outageLogMs?: number;
  /** How often the subscriber's health is proven with a heartbeat on the change channel, in ms (default 1,000). */
  heartbeatMs?: number;
}

export interface RedisStoreEvents {
  /** Called when a connection becomes ready again; key caches must be flushed. */
  onReconnect?: () => void;
  onCommandError?: (kind: 'timeout' | 'error') => void;
  /**
   * A connection became ready (true) or closed (false): the request path's command client, the
   * pub/sub subscriber, or the key operations' management connection.
   */
  onConnectionState?: (up: boolean, connection: 'command' | 'subscriber' | 'management') => void;
  /** The server's eviction policy and persistence were read (redis-server-checks.ts). */
  onServerReading?: (reading: ServerReading, mayEvict: boolean) => void;
}

/**
 * Redis layout (every command touches one key, or keys of one hash slot, so it also works on Redis Cluster):
 *   {prefix}{keystore}:…              key records, their indexes and the audit stream (redis-key-records.ts)
 *   {prefix}{<apiKey>}:nonce:<n>      replay guard entry, SET NX PX         ┐ request-path state of one key:
 *   {prefix}{<apiKey>}:tat            GCRA state (µs), PX until it passes   │ one hash slot, written by one
 *   {prefix}{<apiKey>}:usage          hash: last (ms), YYYY-MM-DD → count,  ┘ slot. Nonce + GCRA: admit-script.ts;
 *                                     b:<process> → last batch written        usage in batches: usage-flush-script.ts
 *   {prefix}key-events                pub/sub channel, message = apiKey or "*"
 * Before rate limits, nonces were {prefix}nonce:<apiKey>:<n> (docs/redis.md "Redis layout": rolling upgrades).
 */
export function createRedisStore(
  options: RedisStoreOptions,
  deps: { logger: Logger; events?: RedisStoreEvents; clock?: Clock; fence?: ReplayFence },
): Store & { client: RedisClient; pingKeyOperations(): Promise<void> } {
  const prefix = options.prefix ?? 'keygate:';
  const channel = `${prefix}key-events`;
  const connection =
    options.connection ?? (options.url !== undefined ? { mode: 'standalone' as const, url: options.url } : undefined);
  if (!connection) throw new Error('createRedisStore: give url or connection');
  // Fail closed and fast: no queueing while disconnected, bounded commands.
  // No ioredis per-command timer: every command goes through run(), whose deadline governs
  // (see below); a second timer per command would only cost CPU on the request path.
  const clientOptions = {
    commandTimeoutMs: undefined,
    connectTimeoutMs: options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS,
  };
  const client = createRedisClient(connection, { ...clientOptions, subscriber: false });
  // Cluster: PUBLISH reaches every node, so one subscription on any node hears every change.
  const subscriber = createRedisClient(connection, { ...clientOptions, subscriber: true });
  // The key operations (management API, CLI) get a connection of their own: a page of keys, a
  // burst of changes or a WAIT (which blocks its connection and counts only that connection's
  // writes) then queues behind nothing of the request path's, and no admit queues behind them.
  const manager = createRedisClient(connection, { ...clientOptions, subscriber: false });
  const minReplicas = options.durability?.minReplicas ?? 0;
  const durability = createDurability(
    { minReplicas, timeoutMs: options.durability?.timeoutMs ?? 1_000, replyMarginMs: options.commandTimeoutMs ?? 500 },
    { client: manager },
  );
  const stopWatching =
    connection.mode === 'sentinel'
      ? watchSentinelFailover(connection, () => {
          // Before the reconnect: no admit may reach the new master ahead of the fence.
          if (deps.fence) {
            deps.fence.raise('switch_master');
            deps.logger.warn({ cause: 'switch_master' }, 'redis failover seen: replay fence raised');
          }
          deps.logger.info('sentinel reports a new master; reconnecting');
          // Only a ready connection: one that is (re)connecting already asks the sentinels.
          for (const c of [client, subscriber, manager]) if (c.status === 'ready') c.disconnect(true);
        })
      : () => {};
  const listeners = new Set<KeyChangeListener>();
  const events = deps.events ?? {};
  const emit = (apiKey: string | null) => {
    for (const l of listeners) l(apiKey);
  };

  const outages = createRedisOutageLog(
    { ...(options.outageLogMs !== undefined && { intervalMs: options.outageLogMs }) },
    { logger: deps.logger, clock: deps.clock ?? systemClock() },
  );
  for (const [name, conn] of [
    ['client', client],
    ['subscriber', subscriber],
    ['management', manager],
  ] as const) {
    conn.on('error', (err: Error) => outages.down(name, err));
    const label = name === 'client' ? 'command' : name;
    conn.on('ready', () => {
      outages.up(name);
      // The subscriber is "up" only once its subscription is confirmed (confirmSubscription).
      if (name === 'subscriber') return void confirmSubscription();
      events.onConnectionState?.(true, label);
      // The request path's caches follow the command and subscriber connections only.
      if (name === 'management') return;
      if (name === 'client') {
        // Records of the layout before issue 27, if any: moved at each connect (a no-op once moved).
        checks.connected();
        records
          .migrateLegacy()
          .catch((err: Error) => deps.logger.warn({ err: err.message }, 'legacy key migration failed'));
      }
      // Anything may have changed while we were away: flush caches.
      emit(null);
      events.onReconnect?.();
    });
    conn.on('close', () => {
      if (name === 'subscriber') {
        subscribed = false;
        // Changes may now be missed: the filter is trusted again only once rebuilt after the next confirmation.
        forgetKnown();
      }
      outages.down(name);
      events.onConnectionState?.(false, label);
    });
  }
  // Subscribed means subscribed: SUBSCRIBE is sent on every (re)connect and only its reply marks the
  // subscriber up. Until then key caches re-read keys after a short bound (Store.subscribed).
  let subscribed = false;
  let subscribing = false;
  function confirmSubscription() {
    if (subscribing) return;
    subscribing = true;
    subscriber
      .subscribe(channel)
      .then(() => {
        subscribing = false;
        if (subscriber.status !== 'ready') return;
        subscribed = true;
        rebuildKnown();
        events.onConnectionState?.(true, 'subscriber');
        // Anything may have changed while we were not listening: flush caches.
        emit(null);
        events.onReconnect?.();
      })
      .catch((err: Error) => {
        subscribing = false;
        deps.logger.warn({ err: err.message }, 'redis subscribe failed; retrying');
        setTimeout(() => subscriber.status === 'ready' && confirmSubscription(), 500).unref();
      });
  }
  subscriber.on('message', (ch: string, message: string) => {
    if (ch !== channel || heartbeat.heard(message)) return;
    if (message === '*') rebuildKnown();
    else noteKnown(message);
    emit(message === '*' ? null : message);
  });

  // The deadline starts at the call: ioredis starts its own timer only when a command is
  // written, and with auto-pipelining a command waits while the previous batch is in flight
  // (a frozen Redis answered in 2x the timeout). One timer serves every call in flight
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
  const checks = createRedisServerChecks(
    {
      allowEviction: options.durability?.allowEvictingRedis ?? false,
      allowVolatileKeyChanges: options.durability?.allowVolatileKeyChanges ?? false,
      minReplicas,
    },
    { client, run, logger: deps.logger, ...(events.onServerReading && { onReading: events.onServerReading }) },
  );
  const servable = checks.requestRefusal;

  const stopFence = deps.fence
    ? watchFailovers(client, deps.fence, {
        logger: deps.logger,
        // On the connection that just became ready, under the command deadline.
        runIdOf: () => run(async () => /run_id:(\w+)/.exec(await (client as Redis).info('server'))?.[1] ?? ''),
      })
    : () => {};

  // A subscriber on a node that hangs hears nothing and reports nothing (subscriber-heartbeat.ts):
  // when its own heartbeats stop arriving, stop trusting cached keys and move the subscriber.
  const heartbeat = startSubscriberHeartbeat(
    { intervalMs: options.heartbeatMs ?? HEARTBEAT_MS, misses: HEARTBEAT_MISSES, mark: randomBytes(6).toString('hex') },
    {
      publish: (message) => run(() => client.publish(channel, message)),
      onLost: () => {
        deps.logger.warn('change messages not heard on the subscriber: key caches flushed, subscriber moved');
        forgetKnown(); // changes may have been missed: not trusted again until rebuilt
        if (subscribed) {
          subscribed = false;
          events.onConnectionState?.(false, 'subscriber');
        }
        emit(null);
        events.onReconnect?.();
        // A SUBSCRIBE stuck on the silent node must not hold up the next one.
        subscribing = false;
        // Connected, or stuck in its ready check on the silent node: reconnect. A client that is
        // already reconnecting (Redis down) does so by itself.
        if (subscriber.status === 'ready' || subscriber.status === 'connect') subscriber.disconnect(true);
      },
      onHeard: () => {
        if (subscribed || subscriber.status !== 'ready') return;
        deps.logger.info('change messages heard again on the subscriber');
        subscribed = true;
        rebuildKnown();
        events.onConnectionState?.(true, 'subscriber');
        // Changes made while nothing was heard were missed: flush again.
        emit(null);
        events.onReconnect?.();
      },
    },
  );

  const recordOptions = { prefix, channel, ...(options.cipher && { cipher: options.cipher }) };
  // The request path's reads on its connection; the key operations' reads and changes on theirs,
  // where WAIT can count the changes.
  const records = createRedisKeyRecords(recordOptions, { client, logger: deps.logger });
  const changes = createRedisKeyRecords(recordOptions, { client: manager, logger: deps.logger });
  /**
   * The one place a key change is acknowledged: `write` runs on the management connection under the
   * command deadline, then only once the required replicas have it (every management name shares
   * the {keystore} hash tag: one master to wait on; `also` for the names outside it).
   */
  async function commit<T>(write: () => Promise<T>, also: readonly string[] = []): Promise<T> {
    const result = await run(write);
    await durability.ensure([`${prefix}{keystore}:index`, ...also]);
    return result;
  }
  /**
   * Which apiKeys may exist (known-keys.ts), so that a token naming an unknown key, a flood of random
   * `sub` values above all, costs no Redis read. Trusted only while it is complete and current: built
   * from the index after the subscription is confirmed, with every change message heard since (and
   * this process's own writes) added; dropped when the subscriber closes; rebuilt on "*" (everything
   * changed) and when it outgrows its capacity. Until it is in force, mayHaveKey says "maybe" to all.
   */
  let known: KnownKeys | null = null;
  let building: KnownKeys | null = null;
  let knownGeneration = 0;
  const KNOWN_PAGE = 10_000;
  const KNOWN_MIN_CAPACITY = 65_536;
  function forgetKnown() {
    knownGeneration++;
    known = null;
    building = null;
  }
  function noteKnown(apiKey: string) {
    building?.add(apiKey);
    if (!known) return;
    known.add(apiKey);
    // Past capacity false positives climb: build a larger one, keeping this one (still complete) meanwhile.
    if (known.added > known.capacity && !building) rebuildKnown(true);
  }
  function rebuildKnown(keepCurrent = false) {
    const generation = ++knownGeneration;
    if (!keepCurrent) known = null;
    building = null;
    void (async () => {
      const count = await run(() => records.countKeys());
      if (generation !== knownGeneration) return;
      const filter = createKnownKeys({ capacity: Math.max(KNOWN_MIN_CAPACITY, 2 * count) });
      building = filter; // change messages from now on are added while the index is read
      let after: string | undefined;
      for (;;) {
        const page = await run(() => records.namesAfter(after, KNOWN_PAGE));
        if (generation !== knownGeneration) return;
        for (const name of page) filter.add(name);
        if (page.length < KNOWN_PAGE) break;
        after = page[page.length - 1];
      }
      if (!subscribed) return;
      known = filter;
      building = null;
      deps.logger.debug({ keys: filter.added, bytes: filter.bytes }, 'known-keys filter in force');
    })().catch((err: Error) => {
      if (generation !== knownGeneration) return;
      deps.logger.warn({ err: err.message }, 'known-keys filter not built; unknown keys are read from redis');
      // Retried while the subscription lasts; until then every lookup reads Redis, as without the filter.
      setTimeout(() => generation === knownGeneration && subscribed && rebuildKnown(keepCurrent), 1_000).unref();
    });
  }

  // The {…} hash tag puts every name of one key's request-path state in one Cluster slot.
  const stateOf = (apiKey: string) => `${prefix}{${apiKey}}:`;
  client.defineCommand('keygateAdmit', { numberOfKeys: 2, lua: ADMIT_SCRIPT });
  client.defineCommand('keygateUsage', { numberOfKeys: 1, lua: USAGE_FLUSH_SCRIPT });
  const scripts = client as unknown as {
    keygateAdmit(...args: Array<string | number>): Promise<number[]>;
    keygateUsage(...args: Array<string | number>): Promise<number>;
  };
  const admitScript = scripts.keygateAdmit.bind(client);
  // The request path's nonce SET: every one a loop turn issues leaves in one write (turn-batch.ts).
  const sendInTurn = createTurnSend(client);
  const usageScript = scripts.keygateUsage.bind(client);

  // Usage is counted in process and written in batches (usage-writer.ts); the mark field tells
  // this process's batches from other replicas' so a retried batch is applied once.
  const mark = `b:${randomBytes(6).toString('hex')}`;
  const usage = createUsageWriter(
    { flushMs: options.usageFlushMs ?? 1_000 },
    {
      clock: deps.clock ?? systemClock(),
      logger: deps.logger,
      write: (b, oldest, nowMs) =>
        run(() =>
          usageScript(
            `${stateOf(b.apiKey)}usage`,
            mark,
            b.seq,
            b.usage.lastUsedAtMs,
            oldest,
            nowMs,
            ...[...b.usage.perDay].flat(),
          ),
        ),
    },
  );
  /** An admission that came in time, with its usage counted: mapped inside the deadline's one promise. */
  const counted = (apiKey: string, admission: Admission) => {
    if (admission.outcome === 'admitted') usage.count(apiKey);
    return admission;
  };

  // A deleted key's rate-limit state and usage (pending in this process too): another slot than
  // the record, so after the commit (a leftover is harmless: nothing reads it without the record).
  const dropRequestState = async (apiKeys: readonly string[]) => {
    for (const k of apiKeys) {
      usage.drop(k);
      await manager.del(`${stateOf(k)}tat`, `${stateOf(k)}usage`);
    }
  };

  const store: Store & { client: RedisClient; pingKeyOperations(): Promise<void> } = {
    kind: 'redis',
    client,
    getKey: (apiKey) => gated(servable, () => run(() => records.getKey(apiKey))),
    // A name the complete filter has never seen: no key by that name, as far as change messages tell.
    mayHaveKey: (apiKey) => !(subscribed && known !== null && !known.mayHave(apiKey)),
    readKey: (apiKey) => run(() => changes.readKey(apiKey)),
    listKeys: (query) => run(() => changes.listKeys(query)),
    commitKeyChanges: async (change) => {
      const result = await gated(checks.changeRefusal, () => commit(() => changes.commitKeyChange(change)));
      // Ours are known at once, before their change message comes back.
      if (result.ok) for (const w of change.writes) if (w.next !== null) noteKnown(w.apiKey);
      if (result.ok)
        await run(() => dropRequestState(change.writes.filter((w) => w.next === null).map((w) => w.apiKey)));
      return result;
    },
    putKey: (record) =>
      commit(async () => {
        await changes.commitKeyChange({ writes: [{ apiKey: record.apiKey, next: record }], audit: [] });
        noteKnown(record.apiKey);
      }),
    deleteKey: async (apiKey) => {
      const existed = await commit(async () => {
        const there = (await changes.readKey(apiKey)) !== null;
        await changes.commitKeyChange({ writes: [{ apiKey, next: null }], audit: [] });
        return there;
      });
      await run(() => dropRequestState([apiKey]));
      return existed;
    },
    admit: (apiKey, nonce, ttlMs, limit) => {
      const refused = servable();
      if (refused !== undefined) return gated(servable, () => store.admit(apiKey, nonce, ttlMs, limit));
      const state = stateOf(apiKey);
      // A key without a limit needs only the nonce's SET NX: no script, no TIME.
      // The reply is parsed and counted in the deadline's own promise: no .then chain per request.
      return limit === undefined
        ? deadlines.run(
            () => sendInTurn('set', [`${state}nonce:${nonce}`, '1', 'PX', ttlMs, 'NX']),
            toStoreError,
            (reply) => counted(apiKey, parseNonceReply(reply as string | null)),
          )
        : deadlines.run(
            () => admitScript(`${state}nonce:${nonce}`, `${state}tat`, ttlMs, limit.intervalUs, limit.burst),
            toStoreError,
            (reply) => counted(apiKey, parseAdmissionReply(reply)),
          );
    },
    // This process's own counts are written first, so its reads are exact; other replicas' within one interval.
    getUsage: async (apiKey) => {
      await usage.flush();
      return run(async () => parseUsageHash(await manager.hgetall(`${stateOf(apiKey)}usage`)));
    },
    flushUsage: () => usage.flush(),
    appendAudit: (entry) => commit(() => changes.appendAudit(entry)),
    subscribed: () => subscribed,
    onKeyChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    ping: () =>
      run(async () => {
        await client.ping();
      }),
    // The key operations' own connection connects on its own schedule: a one-shot command (the CLI)
    // waits for it too, or its first command meets a connection not yet open (no offline queue).
    pingKeyOperations: () =>
      run(async () => {
        await manager.ping();
      }),
    countKeys: () => gated(servable, () => run(() => records.countKeys())),
    async close() {
      forgetKnown();
      await usage.close();
      listeners.clear();
      stopWatching();
      stopFence();
      checks.stop();
      heartbeat.stop();
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
  return store;
}
