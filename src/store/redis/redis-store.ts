// Tested in test/e2e/redis-store.test.ts, test/e2e/store-contract.test.ts (both stores).
import type { Logger } from 'pino';
import { systemClock, type Clock } from '../../clock.js';
import type { RedisConnection } from '../../config/redis-settings.js';
import type { SecretCipher } from '../../keys/secret-cipher.js';
import type { ReplayFence } from '../replay-fence.js';
import { KeystoreStaleError, type Admission, type ConnectionProblem, type Store } from '../store.js';
import { createChangeFeed } from './change-feed.js';
import type { RedisClient } from './connection/redis-connection.js';
import { createRedisConnections } from './connection/redis-connections.js';
import { createDurability } from './connection/redis-durability.js';
import { createIpBlockListener } from './ip-block-listener.js';
import { createKeystoreEpoch } from './connection/keystore-epoch.js';
import { AUDIT_STREAM_MAX } from '../audit-entry.js';
import { createRedisKeyRecords } from './redis-key-records.js';
import { createRedisOwners } from './redis-owners.js';
import { createRequestState, type RequestState } from './request-state.js';
import { createRequestStateGroup, type RequestStateGroup } from './request-state-group.js';
import { createRegionalAdmission } from './regional-admission.js';
import { createKeystoreFreshness } from './connection/keystore-freshness.js';
import { randomBytes } from 'node:crypto';
import { createRedisWebhookQueue } from './redis-webhook-queue.js';
import { createRedisServerChecks, gated, type ServerReading } from './connection/redis-server-checks.js';

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
  /**
   * Raise `deps.fence` on the failovers failover-watch.ts sees (KEYGATE_REPLAY_FENCE; default true). An emptied
   * keystore (keystore-epoch.ts) raises it either way: that loss is certain, not a maybe.
   */
  watchFailovers?: boolean;
  /** How many entries the audit stream keeps (default AUDIT_STREAM_MAX); tests make it small to drive the trim. */
  auditStreamMax?: number;
  /** Regions (docs/regions.md): absent = one region, everything as before. */
  regions?: RedisRegionsOptions;
}

export interface RedisRegionsOptions {
  readonly self: string;
  readonly defaultHome: string;
  readonly groups: ReadonlyArray<{ readonly name: string; readonly connection: RedisConnection }>;
  /** This region's keystore replica (reads, the change feed, heartbeats heard); undefined = the keystore. */
  readonly keystoreReplica?: RedisConnection | undefined;
  readonly maxStalenessMs: number;
  /** The largest recv_window the policy in force allows, in ms. */
  readonly maxRecvWindowMs: () => number;
  /** Tells this instance's heartbeats from others'; random when absent. */
  readonly instanceId?: string;
  /** The heartbeat's period, in ms (FRESHNESS_HEARTBEAT_MS). */
  readonly heartbeatMs?: number;
  /**
   * false: a store that admits nothing (`keygate keys`): no heartbeat, every admit refused; its regions serve the
   * key operations' credits (reads, top-ups, a move's copy) and usage at each key's home.
   */
  readonly admits?: boolean;
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
  /** The keystore's epoch marker was gone: the database was emptied (keystore-epoch.ts). */
  onKeystoreEmptied?: () => void;
  /** Regions: an admit run on another region's request-state Redis, its round trip in seconds. */
  onRemoteAdmit?: (home: string, seconds: number) => void;
}

/** Regions in a store that admits nothing (`keygate keys`): every admit refused, as a stale instance's are. */
const NOT_ADMITTING = {
  refusal: () => new KeystoreStaleError('this process admits no requests (keygate keys)'),
};

/**
 * Redis layout (every command touches one key, or keys of one hash slot, so it also works on Redis Cluster):
 *   {prefix}{keystore}:…              key records, their indexes and the audit stream (redis-key-records.ts)
 *   {prefix}{keystore}:epoch          a random value written once: gone means the keystore was emptied (keystore-epoch.ts)
 *   {prefix}{<apiKey>}:nonce:<n>      replay guard entry, SET NX PX         ┐ request-path state of one key:
 *   {prefix}{<apiKey>}:budget         GCRA state "<TAT µs>:<interval µs>"   │ one hash slot, written by one
 *   {prefix}{<apiKey>}:usage          hash: last (ms), YYYY-MM-DD → count,  ┘ slot. Nonce + GCRA: admit-script.ts;
 *                                     b:<process> → last batch written        usage in batches: usage-flush-script.ts
 *   {prefix}{<apiKey>}:outcomes       hash: ring slot → "<bucket> <count per outcome>" (keys/outcome-usage.ts), same batches
 *   {prefix}{owner:<o>}:usage / :outcomes   the owner's outcomes (summed over its keys) and its batch marks
 *   {prefix}{owner:<o>}:key:<apiKey>:nonce:<n> / :budget   the same for a key with an owner, in its owner's slot
 *   {prefix}{owner:<o>}:budget        the owner's GCRA state: one slot with its keys' nonces and TATs
 *   {prefix}{keystore}:owners         hash: owner → its own settings (redis-owners.ts)
 *   {prefix}{ipfail:<ip>}             failed-authentication GCRA state of a client IP or IPv6 /64
 *   {prefix}key-events                pub/sub channel, message = apiKey, "*" or "owner:<owner>"
 *   {prefix}ip-blocks:<db>            pub/sub channel, message = "<ip or /64> <µs>" (ip-block-listener.ts); <db> the
 *                                     database number (0 under Sentinel and Cluster)
 * Regions (docs/regions.md): the request-path state above lives in each region's request-state Redis (a key's in
 * its home's, request-state-group.ts, with its epoch marker {prefix}{regionstate}:epoch); the keystore keeps
 *   {prefix}{keystore}:heartbeat:<instance>  an instance's heartbeat, PX, published as "<instance> <seq>" on
 *   {prefix}keystore-heartbeats              (keystore-freshness.ts)
 * Before rate limits, nonces were {prefix}nonce:<apiKey>:<n> (docs/redis.md "Redis layout": rolling upgrades).
 */
export function createRedisStore(
  options: RedisStoreOptions,
  deps: { logger: Logger; events?: RedisStoreEvents; clock?: Clock; fence?: ReplayFence },
): Omit<Store, 'admit'> & {
  /** Always a promise here: Redis answers later. */
  admit(...args: Parameters<Store['admit']>): Promise<Admission>;
  client: RedisClient;
  pingKeyOperations(): Promise<void>;
  /** Why the request path's connection is down (its last error), or undefined while it is up (/readyz). */
  connectionProblem(): ConnectionProblem | undefined;
  /** Regions: seconds since the newest own keystore heartbeat heard back (Infinity before one); undefined without regions. */
  keystoreStalenessSeconds(): number | undefined;
} {
  const prefix = options.prefix ?? 'keygate:';
  const channel = `${prefix}key-events`;
  const connection =
    options.connection ?? (options.url !== undefined ? { mode: 'standalone' as const, url: options.url } : undefined);
  if (!connection) throw new Error('createRedisStore: give url or connection');
  // "<ip or /64> <µs>" when an IP's failed-authentication budget is empty (ip-budget.ts). Pub/sub ignores
  // the database number, so the channel names it: deployments on other databases of one Redis never hear
  // each other's blocks.
  const ipChannel = `${prefix}ip-blocks:${databaseOf(connection)}`;
  const events = deps.events ?? {};
  const clock = deps.clock ?? systemClock();
  const regions = options.regions;
  const connections = createRedisConnections(
    connection,
    { ...options, ...(regions?.keystoreReplica && { readConnection: regions.keystoreReplica }) },
    {
      logger: deps.logger,
      clock,
      ...(deps.fence && options.watchFailovers !== false && { fence: deps.fence }),
      events,
      onReady: (name) => {
        // The request path's caches follow the command and subscriber connections only.
        if (name === 'management') return void epoch.check();
        // Emptied while we were away (a restart without persistence)? Read before anything is served again.
        epoch.connected();
        // Nothing is served on the command connection until the server's settings have been read again.
        checks.connected();
        // Records of the first layout, if any: moved at each connect (a no-op once moved). Not with regions: the
        // command connection then reads a replica (docs/regions.md: upgrade before turning regions on).
        if (!regions)
          records
            .migrateLegacy()
            .catch((err: Error) => deps.logger.warn({ err: err.message }, 'legacy key migration failed'));
        // Anything may have changed while we were away: flush caches.
        feed.flush();
      },
      subscriberReady: () => feed.subscriberReady(),
      subscriberClosed: () => feed.subscriberClosed(),
    },
  );
  const { client, manager, run } = connections;
  // What the server must keep (noeviction; AOF or a replica), read from it: the request
  // path's reads and admits, and key changes, wait for the first reading and are refused by a bad one.
  const checks = createRedisServerChecks(
    {
      allowEviction: options.durability?.allowEvictingRedis ?? false,
      allowVolatileKeyChanges: options.durability?.allowVolatileKeyChanges ?? false,
      minReplicas: options.durability?.minReplicas ?? 0,
    },
    { client, run, logger: deps.logger, ...(events.onServerReading && { onReading: events.onServerReading }) },
  );
  // The keystore's epoch read once first (keystore-epoch.ts), then the server's settings; one comparison once read.
  const servable = () => epoch.refusal() ?? checks.requestRefusal();

  const auditStreamMax = options.auditStreamMax ?? AUDIT_STREAM_MAX;
  const recordOptions = { prefix, channel, auditStreamMax, ...(options.cipher && { cipher: options.cipher }) };
  // The request path's reads on its connection; the key operations' reads and changes on theirs,
  // where WAIT can count the changes.
  const records = createRedisKeyRecords(recordOptions, { client, logger: deps.logger });
  const changes = createRedisKeyRecords(recordOptions, { client: manager, logger: deps.logger });
  const durability = createDurability(
    {
      minReplicas: options.durability?.minReplicas ?? 0,
      timeoutMs: options.durability?.timeoutMs ?? 1_000,
      replyMarginMs: options.commandTimeoutMs ?? 500,
    },
    { client: manager },
  );
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

  // A FLUSHDB/FLUSHALL by anyone else leaves the connections and the run_id as they were.
  const epoch = createKeystoreEpoch(
    { name: `${prefix}{keystore}:epoch` },
    {
      client: manager,
      run,
      ensure: (keys) => durability.ensure(keys),
      logger: deps.logger,
      onEmptied: () => {
        // The fence first: from here on no token signed before this moment passes, nonce or not.
        deps.fence?.raise('keystore_emptied');
        feed.everythingChanged();
        events.onKeystoreEmptied?.();
      },
    },
  );

  // Regions: this region's keystore copy proven fresh (keystore-freshness.ts); the request-state groups' epoch
  // markers are read on its timer, every fourth beat, as the change feed's heartbeat reads the one group's.
  let beats = 0;
  const freshness =
    regions === undefined || regions.admits === false
      ? undefined
      : createKeystoreFreshness(
          {
            prefix,
            instanceId: regions.instanceId ?? randomBytes(8).toString('hex'),
            maxStalenessMs: regions.maxStalenessMs,
            ...(regions.heartbeatMs !== undefined && { intervalMs: regions.heartbeatMs }),
          },
          {
            master: manager,
            run,
            logger: deps.logger,
            onTick: () => {
              if (++beats % 4 === 0) for (const g of groups.values()) g.checkEpoch();
            },
            onGap: () => feed.everythingChanged(),
          },
        );
  if (freshness) connections.subscriber.on('message', (ch: string, m: string) => void freshness.heard(ch, m));

  const feed = createChangeFeed(
    {
      channel,
      alsoChannels: freshness ? [ipChannel, freshness.channel] : [ipChannel],
      ...(options.heartbeatMs !== undefined && { heartbeatMs: options.heartbeatMs }),
    },
    {
      subscriber: connections.subscriber,
      logger: deps.logger,
      publish: (message) => run(() => client.publish(channel, message)),
      countKeys: () => run(() => records.countKeys()),
      namesAfter: (after, limit) => run(() => records.namesAfter(after, limit)),
      connectionDown: () => connections.reachability.down(),
      onHeartbeat: () => void epoch.check(),
      ...(events.onConnectionState && { onConnectionState: events.onConnectionState }),
      ...(events.onReconnect && { onReconnect: events.onReconnect }),
    },
  );
  // Owners' own limits: a table every instance keeps from the owners hash and the change feed.
  const owners = createRedisOwners(
    { prefix, channel, auditStreamMax, ...(options.outageLogMs !== undefined && { outageLogMs: options.outageLogMs }) },
    { client, manager, logger: deps.logger, clock },
  );
  feed.onKeyChange((message) => owners.changed(message));
  // Regions: one request-state group per region listed, each fenced on its own (request-state-group.ts).
  const groups = new Map<string, RequestStateGroup>();
  for (const g of regions?.groups ?? [])
    groups.set(
      g.name,
      createRequestStateGroup(
        {
          name: g.name,
          connection: g.connection,
          prefix,
          ipChannel,
          own: g.name === regions?.self,
          ...(options.commandTimeoutMs !== undefined && { commandTimeoutMs: options.commandTimeoutMs }),
          ...(options.connectTimeoutMs !== undefined && { connectTimeoutMs: options.connectTimeoutMs }),
          ...(options.usageFlushMs !== undefined && { usageFlushMs: options.usageFlushMs }),
          ...(options.durability?.allowEvictingRedis !== undefined && {
            allowEvictingRedis: options.durability.allowEvictingRedis,
          }),
          ...(options.watchFailovers !== undefined && { watchFailovers: options.watchFailovers }),
        },
        {
          logger: deps.logger,
          clock,
          events: {
            ...(events.onCommandError && { onCommandError: events.onCommandError }),
          },
        },
      ),
    );
  const regional =
    regions !== undefined
      ? createRegionalAdmission(
          {
            self: regions.self,
            defaultHome: regions.defaultHome,
            maxStalenessMs: regions.maxStalenessMs,
            commitMarginMs: options.commandTimeoutMs ?? 500,
            maxRecvWindowMs: regions.maxRecvWindowMs,
          },
          {
            groups,
            freshness: freshness ?? NOT_ADMITTING,
            ownerHome: (owner) => owners.home(owner),
            logger: deps.logger,
            ...(events.onRemoteAdmit && { onRemoteAdmit: events.onRemoteAdmit }),
          },
        )
      : undefined;
  // Regions: the failed-authentication budget and its blocks stay in this region (its own group's subscriber).
  const ipBlocks =
    groups.get(regions?.self ?? '')?.ipBlocks ??
    createIpBlockListener({ channel: ipChannel }, { subscriber: connections.subscriber });
  // A balance is read and written as a whole only by a home move (moveCredits), between two regions' groups.
  const requests: Omit<RequestState, 'readBalance' | 'writeBalance'> =
    regional ??
    createRequestState(
      { prefix, ipChannel, ...(options.usageFlushMs !== undefined && { usageFlushMs: options.usageFlushMs }) },
      { connections, clock, logger: deps.logger },
    );

  return {
    kind: 'redis',
    client,
    // No key is read before the owners' limits are (an owner's own limit must never fall back to the default).
    getKey: (apiKey) =>
      gated(freshness ? () => freshness.refusal() ?? servable() : servable, () =>
        run(async () => {
          await owners.ensureLoaded();
          return records.getKey(apiKey);
        }),
      ),
    // A name the complete filter has never seen: no key by that name, as far as change messages tell.
    mayHaveKey: (apiKey) => feed.mayHaveKey(apiKey),
    readKey: (apiKey) => run(() => changes.readKey(apiKey)),
    deletedOwner: (apiKey) => run(() => changes.deletedOwner(apiKey)),
    listKeys: (query) => run(() => changes.listKeys(query)),
    commitKeyChanges: async (change) => {
      const result = await gated(checks.changeRefusal, () => commit(() => changes.commitKeyChange(change)));
      // Ours are known at once, before their change message comes back.
      if (result.ok) for (const w of change.writes) if (w.next !== null) feed.noteKnown(w.apiKey);
      if (result.ok) await requests.drop(change.writes.filter((w) => w.next === null).map((w) => w.apiKey));
      return result;
    },
    putKey: (record) =>
      commit(async () => {
        await changes.commitKeyChange({ writes: [{ apiKey: record.apiKey, next: record }], audit: [] });
        feed.noteKnown(record.apiKey);
      }),
    deleteKey: async (apiKey) => {
      const existed = await commit(async () => {
        const there = (await changes.readKey(apiKey)) !== null;
        await changes.commitKeyChange({ writes: [{ apiKey, next: null }], audit: [] });
        return there;
      });
      await requests.drop([apiKey]);
      return existed;
    },
    admit: (apiKey, nonce, ttlMs, charge, record, nonceNs) => {
      // Regions: the home's request-state group decides (regional-admission.ts); the keystore admits nothing.
      if (regional !== undefined) return regional.admit(apiKey, nonce, ttlMs, charge, record, nonceNs);
      // One call on the request path when the settings allow; no closure unless they do not.
      const refused = servable();
      return refused === undefined
        ? requests.admit(apiKey, nonce, ttlMs, charge)
        : gated(servable, () => requests.admit(apiKey, nonce, ttlMs, charge), refused);
    },
    // A failed authentication's spend is refused anyway: an evicted IP budget only forgets a block.
    spendFailedAuth: requests.spendFailedAuth,
    onIpBlocked: (listener) => ipBlocks.onIpBlocked(listener),
    getUsage: requests.getUsage,
    countOutcome: requests.countOutcome,
    getOutcomeUsage: requests.getOutcomeUsage,
    flushUsage: requests.flushUsage,
    appendAudit: (entry) => commit(() => changes.appendAudit(entry)),
    readAudit: (range) => run(() => changes.readAudit(range)),
    keyOfSecret: (secret) => run(() => changes.keyOfSecret(secret)),
    // The webhook deliveries not yet made (the delivery list, retry-now), beside the audit stream they come from.
    webhooks: createRedisWebhookQueue({ prefix }, { client: manager, run }),
    readOwner: (owner) => run(() => owners.read(owner)),
    listOwners: () => run(() => owners.list()),
    putOwner: (record, entry) => gated(checks.changeRefusal, () => commit(() => owners.put(record, entry))),
    ownerLimit: (owner) => owners.limit(owner),
    ownerCredits: (owner) => owners.credits(owner),
    // Regions: a balance lives at its owner's home, read from the owners' table (loaded here in `keygate keys`).
    addCredits: async (target, add) => {
      if (regional !== undefined && target.owner !== undefined) await run(() => owners.ensureLoaded());
      return requests.addCredits(target, add);
    },
    readCredits: async (target) => {
      if (regional !== undefined && target.owner !== undefined) await run(() => owners.ensureLoaded());
      return requests.readCredits(target);
    },
    // Regions only: a store without them (`keygate keys`) has no request-state groups to carry a balance between.
    ...(regional && { moveCredits: regional.moveCredits }),
    ownerBudget: (owner, limit) => run(() => owners.budget(owner, limit)),
    subscribed: () => feed.subscribed(),
    onKeyChange: (listener) => feed.onKeyChange(listener),
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
    servable: () => gated(servable, async () => {}),
    connectionProblem: () => connections.reachability.problem(),
    keystoreStalenessSeconds: () => freshness?.stalenessSeconds(),
    async close() {
      freshness?.stop();
      checks.stop();
      feed.stop();
      ipBlocks.stop();
      owners.stop();
      await requests.close();
      await connections.close();
    },
  };
}

/** The database number a connection selects: a standalone URL's path (`redis://host/3`) or `?db=3`, as ioredis reads it; else 0. */
export function databaseOf(connection: RedisConnection): number {
  if (connection.mode !== 'standalone') return 0;
  try {
    const url = new URL(connection.url);
    const db = url.searchParams.get('db') ?? url.pathname.slice(1);
    return /^\d{1,5}$/.test(db) ? Number(db) : 0;
  } catch {
    return 0;
  }
}
