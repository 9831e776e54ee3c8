import type { Logger } from 'pino';
import type { RedisConnection } from '../config/redis-settings.js';
import { ADMIT_SCRIPT } from './admit-script.js';
import { createDurability } from './redis-durability.js';
import { createRedisClient, watchSentinelFailover, type RedisClient } from './redis-connection.js';
import { USAGE_DAYS, type KeyUsage } from '../keys/key-usage.js';
import { parseKeyRecord, toExternal, type KeyRecord } from '../keys/key-record.js';
import { openExternal, SecretCipherError, type SecretCipher } from '../keys/secret-cipher.js';
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
  durability?: { minReplicas: number; timeoutMs: number };
}

export interface RedisStoreEvents {
  /** Called when a connection becomes ready again; key caches must be flushed. */
  onReconnect?: () => void;
  onCommandError?: (kind: 'timeout' | 'error') => void;
  /** A connection became ready (true) or closed (false): the command client or the pub/sub subscriber. */
  onConnectionState?: (up: boolean, connection: 'command' | 'subscriber') => void;
}

/**
 * Redis layout (every command touches one key, or keys of one hash slot, so it also works on Redis Cluster):
 *   {prefix}key:<apiKey>              JSON key record
 *   {prefix}keys                      set of apiKeys (for listing)
 *   {prefix}{<apiKey>}:nonce:<n>      replay guard entry, SET NX PX         ┐ request-path state of one key:
 *   {prefix}{<apiKey>}:tat            GCRA state (µs), PX until it passes   │ one hash slot, written by one
 *   {prefix}{<apiKey>}:usage          hash: last (ms), YYYY-MM-DD → count   ┘ script (admit-script.ts)
 *   {prefix}key-events                pub/sub channel, message = apiKey or "*"
 *   {prefix}audit                     stream of key changes (who/what/when, never a secret)
 *   {prefix}idempotency:<sha256>      management API Idempotency-Key (per token) -> "apiKey bodyHash", 24 h
 * Before rate limits, nonces were {prefix}nonce:<apiKey>:<n> (docs/redis.md "Redis layout": rolling upgrades).
 */
export function createRedisStore(
  options: RedisStoreOptions,
  deps: { logger: Logger; events?: RedisStoreEvents },
): Store & { client: RedisClient } {
  const prefix = options.prefix ?? 'keygate:';
  const channel = `${prefix}key-events`;
  const connection =
    options.connection ?? (options.url !== undefined ? { mode: 'standalone' as const, url: options.url } : undefined);
  if (!connection) throw new Error('createRedisStore: give url or connection');
  // Fail closed and fast: no queueing while disconnected, bounded commands.
  // No ioredis per-command timer: every command goes through run(), whose deadline governs
  // (see below); a second timer per command would only cost CPU on the request path.
  const clientOptions = { commandTimeoutMs: undefined, connectTimeoutMs: options.connectTimeoutMs ?? 2_000 };
  const client = createRedisClient(connection, { ...clientOptions, subscriber: false });
  // Cluster: PUBLISH reaches every node, so one subscription on any node hears every change.
  const subscriber = createRedisClient(connection, { ...clientOptions, subscriber: true });
  // Key changes wait for replicas with WAIT, which blocks its connection and counts only that
  // connection's writes: they get a connection of their own, so no admit queues behind a WAIT.
  const minReplicas = options.durability?.minReplicas ?? 0;
  const writer = minReplicas > 0 ? createRedisClient(connection, { ...clientOptions, subscriber: false }) : client;
  const durability = createDurability(
    { minReplicas, timeoutMs: options.durability?.timeoutMs ?? 1_000, replyMarginMs: options.commandTimeoutMs ?? 500 },
    { client: writer },
  );
  const stopWatching =
    connection.mode === 'sentinel'
      ? watchSentinelFailover(connection, () => {
          deps.logger.info('sentinel reports a new master; reconnecting');
          // Only a ready connection: one that is (re)connecting already asks the sentinels.
          for (const c of new Set([client, subscriber, writer])) if (c.status === 'ready') c.disconnect(true);
        })
      : () => {};
  const listeners = new Set<KeyChangeListener>();
  const events = deps.events ?? {};
  const emit = (apiKey: string | null) => {
    for (const l of listeners) l(apiKey);
  };

  let everReady = false;
  for (const [name, conn] of [
    ['client', client],
    ['subscriber', subscriber],
  ] as const) {
    conn.on('error', (err: Error) => deps.logger.warn({ conn: name, err: err.message }, 'redis connection error'));
    const label = name === 'client' ? 'command' : 'subscriber';
    conn.on('ready', () => {
      events.onConnectionState?.(true, label);
      if (name === 'client') {
        if (everReady) deps.logger.info('redis reconnected');
        everReady = true;
      }
      // Anything may have changed while we were away: flush caches.
      emit(null);
      events.onReconnect?.();
    });
    conn.on('close', () => events.onConnectionState?.(false, label));
  }
  if (writer !== client)
    writer.on('error', (err: Error) =>
      deps.logger.warn({ conn: 'writer', err: err.message }, 'redis connection error'),
    );
  subscriber.subscribe(channel).catch((err: Error) => deps.logger.warn({ err: err.message }, 'redis subscribe failed'));
  subscriber.on('message', (ch: string, message: string) => {
    if (ch === channel) emit(message === '*' ? null : message);
  });

  // The deadline starts at the call: ioredis starts its own timer only when a command is
  // written, and with auto-pipelining a command waits while the previous batch is in flight
  // (a frozen Redis answered in 2x the timeout).
  //
  // An expired deadline is honoured only after the event loop has read what already arrived:
  // the rejection is deferred to setImmediate, which runs after the poll phase. A reply Redis
  // sent in time is therefore used even when Keygate itself was too busy to read it on time
  // (a saturated loop must never be reported as "Redis down"); a Redis that did not answer
  // still fails within the deadline plus one loop turn.
  const deadlineMs = options.commandTimeoutMs ?? 500;
  function run<T>(fn: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const fail = (err: unknown) => {
        if (settled) return;
        settled = true;
        if (err instanceof StoreUnavailableError) return reject(err);
        const message = (err as Error).message ?? String(err);
        events.onCommandError?.(/timed out/i.test(message) ? 'timeout' : 'error');
        reject(new StoreUnavailableError(`redis: ${message}`, { cause: err }));
      };
      const timer = setTimeout(
        () => setImmediate(() => fail(new Error(`Command timed out after ${deadlineMs} ms (deadline)`))),
        deadlineMs,
      );
      fn().then(
        (value) => {
          clearTimeout(timer);
          if (settled) return;
          settled = true;
          resolve(value);
        },
        (err: unknown) => {
          clearTimeout(timer);
          fail(err);
        },
      );
    });
  }

  /**
   * The one place a key change is committed: `write` runs on the writer connection under the
   * command deadline, then the change is acknowledged only once the required replicas have it
   * (`touched`: the names written, so a Cluster waits on each master that holds one).
   */
  async function commit<T>(touched: readonly string[], write: (w: RedisClient) => Promise<T>): Promise<T> {
    const result = await run(() => write(writer));
    await durability.ensure(touched);
    return result;
  }

  const keyOf = (apiKey: string) => `${prefix}key:${apiKey}`;
  // The {…} hash tag puts every name of one key's request-path state in one Cluster slot.
  const stateOf = (apiKey: string) => `${prefix}{${apiKey}}:`;
  client.defineCommand('keygateAdmit', { numberOfKeys: 3, lua: ADMIT_SCRIPT });
  const admitScript = (
    client as unknown as { keygateAdmit(...args: Array<string | number>): Promise<number[]> }
  ).keygateAdmit.bind(client);

  function decode(apiKey: string, raw: string | null): KeyRecord | null {
    if (raw === null) return null;
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      deps.logger.error(
        { apiKeyPrefix: apiKey.slice(0, 6) },
        'corrupt key record in redis (bad JSON); treating as unknown',
      );
      return null;
    }
    let opened: Record<string, unknown>;
    try {
      opened = openExternal(parsed as Record<string, unknown>, options.cipher);
    } catch (err) {
      // A secret we cannot open is a server configuration problem, not an unknown key: fail closed with 503.
      if (err instanceof SecretCipherError) throw new StoreUnavailableError(`cannot open key secret: ${err.message}`);
      throw err;
    }
    const { record, errors } = parseKeyRecord(opened, 'redis key');
    if (!record) {
      deps.logger.error({ errors }, 'invalid key record in redis; treating as unknown');
      return null;
    }
    return record;
  }

  return {
    kind: 'redis',
    client,
    getKey: (apiKey) => run(async () => decode(apiKey, await client.get(keyOf(apiKey)))),
    listKeys: () =>
      run(async () => {
        const names = (await client.smembers(`${prefix}keys`)).sort();
        // All GETs at once: auto-pipelining sends them in one batch (per node in a Cluster). One awaited
        // GET per key cost a round trip each: 5,000 keys took 0.4 to 0.6 s, past the 500 ms default
        // deadline, so GET /v1/keys could fail with 503 (now ~50 ms).
        const raws = await Promise.all(names.map((name) => client.get(keyOf(name))));
        return names.flatMap((name, i) => decode(name, raws[i] ?? null) ?? []);
      }),
    putKey: (record) =>
      commit([keyOf(record.apiKey), `${prefix}keys`], async (w) => {
        const cipher = options.cipher;
        const external = toExternal(record, cipher && ((secret) => cipher.seal(secret, record.id)));
        await w.set(keyOf(record.apiKey), JSON.stringify(external));
        await w.sadd(`${prefix}keys`, record.apiKey);
        await w.publish(channel, record.apiKey);
      }),
    deleteKey: (apiKey) =>
      commit([keyOf(apiKey), `${prefix}keys`, `${stateOf(apiKey)}tat`], async (w) => {
        const n = await w.del(keyOf(apiKey));
        await w.srem(`${prefix}keys`, apiKey);
        await w.del(`${stateOf(apiKey)}tat`, `${stateOf(apiKey)}usage`);
        await w.publish(channel, apiKey);
        return n > 0;
      }),
    admit: (apiKey, nonce, ttlMs, limit) => {
      const state = stateOf(apiKey);
      return run(() =>
        admitScript(
          `${state}nonce:${nonce}`,
          `${state}tat`,
          `${state}usage`,
          ttlMs,
          limit?.intervalUs ?? 0,
          limit?.burst ?? 0,
          USAGE_DAYS,
        ).then(toAdmission),
      );
    },
    getUsage: (apiKey) => run(async () => toUsage(await client.hgetall(`${stateOf(apiKey)}usage`))),
    claimOnce: (name, value, ttlMs) =>
      commit([`${prefix}${name}`], async (w) => {
        const k = `${prefix}${name}`;
        // SET NX, then read the winner; a winner that expired in between is claimed again once.
        for (let i = 0; i < 2; i++) {
          if ((await w.set(k, value, 'PX', ttlMs, 'NX')) === 'OK') return null;
          const there = await w.get(k);
          if (there !== null) return there;
        }
        return w.get(k);
      }),
    appendAudit: (entry) =>
      commit([`${prefix}audit`], async (w) => {
        await w.xadd(`${prefix}audit`, 'MAXLEN', '~', '100000', '*', 'entry', JSON.stringify(entry));
      }),
    onKeyChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    ping: () =>
      run(async () => {
        await client.ping();
      }),
    countKeys: () => run(() => client.scard(`${prefix}keys`)),
    async close() {
      listeners.clear();
      stopWatching();
      const all = [...new Set([client, subscriber, writer])];
      await Promise.allSettled(all.map((c) => c.quit()));
      for (const c of all) c.disconnect();
    },
  };
}

function toAdmission(reply: number[]): Admission {
  const [outcome, remaining = 0, resetUs = 0, retryAfterUs = 0] = reply;
  if (outcome === 1) return { outcome: 'replay' };
  if (outcome === 2) return { outcome: 'limited', rate: { remaining, resetUs, retryAfterUs } };
  return { outcome: 'admitted', rate: reply.length > 1 ? { remaining, resetUs, retryAfterUs: 0 } : undefined };
}

function toUsage(hash: Record<string, string>): KeyUsage {
  const { last, ...days } = hash;
  const perDay: Record<string, number> = {};
  for (const [day, n] of Object.entries(days)) if (/^\d{4}-\d{2}-\d{2}$/.test(day)) perDay[day] = Number(n);
  return { lastUsedAtMs: last === undefined ? undefined : Number(last), perDay };
}
