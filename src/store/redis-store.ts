import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import { parseKeyRecord, serializeKeyRecord, type KeyRecord } from './key-record.js';
import { StoreUnavailableError, type KeyChangeListener, type Store } from './types.js';

export interface RedisStoreOptions {
  url: string;
  /** Prefix of every Redis key and channel this store uses. */
  prefix?: string;
  /** A command that takes longer than this fails (→ 503), in ms. */
  commandTimeoutMs?: number;
  /** Time allowed to establish a connection, in ms. */
  connectTimeoutMs?: number;
}

export interface RedisStoreEvents {
  /** Called when a connection becomes ready again; key caches must be flushed. */
  onReconnect?: () => void;
  onCommandError?: (kind: 'timeout' | 'error') => void;
  onConnectionState?: (up: boolean) => void;
}

/**
 * Redis layout (every access is one key, so it also works on Redis Cluster):
 *   {prefix}key:<apiKey>          JSON key record
 *   {prefix}keys                  set of apiKeys (for listing)
 *   {prefix}nonce:<apiKey>:<n>    replay guard entry, SET NX PX
 *   {prefix}key-events            pub/sub channel, message = apiKey or "*"
 */
export function createRedisStore(
  options: RedisStoreOptions,
  deps: { logger: Logger; events?: RedisStoreEvents },
): Store & { client: Redis } {
  const prefix = options.prefix ?? 'keygate:';
  const channel = `${prefix}key-events`;
  const redisOptions: RedisOptions = {
    // Fail closed and fast: no queueing while disconnected, bounded commands.
    enableOfflineQueue: false,
    commandTimeout: options.commandTimeoutMs ?? 500,
    connectTimeout: options.connectTimeoutMs ?? 2_000,
    maxRetriesPerRequest: 0,
    autoResubscribe: true,
    enableAutoPipelining: true,
    lazyConnect: false,
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2_000),
  };
  const client = new Redis(options.url, redisOptions);
  const subscriber = new Redis(options.url, { ...redisOptions, enableAutoPipelining: false, enableOfflineQueue: true });
  const listeners = new Set<KeyChangeListener>();
  const events = deps.events ?? {};
  const emit = (apiKey: string | null) => {
    for (const l of listeners) l(apiKey);
  };

  let everReady = false;
  for (const [name, conn] of [['client', client], ['subscriber', subscriber]] as const) {
    conn.on('error', (err: Error) => deps.logger.warn({ conn: name, err: err.message }, 'redis connection error'));
    conn.on('ready', () => {
      if (name === 'client') {
        events.onConnectionState?.(true);
        if (everReady) deps.logger.info('redis reconnected');
        everReady = true;
      }
      // Anything may have changed while we were away: flush caches.
      emit(null);
      events.onReconnect?.();
    });
    conn.on('close', () => {
      if (name === 'client') events.onConnectionState?.(false);
    });
  }
  subscriber.subscribe(channel).catch((err: Error) => deps.logger.warn({ err: err.message }, 'redis subscribe failed'));
  subscriber.on('message', (ch: string, message: string) => {
    if (ch === channel) emit(message === '*' ? null : message);
  });

  // ioredis starts a command's timer only when the command is written, and with
  // auto-pipelining a command waits while the previous batch is in flight (so a
  // frozen Redis answered in 2x the timeout). On the request path (bounded: true)
  // the deadline starts at the call, so no lookup outlives the timeout.
  const deadlineMs = options.commandTimeoutMs ?? 500;
  async function run<T>(fn: () => Promise<T>, bounded = false): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      if (bounded) timer = setTimeout(() => reject(new Error(`Command timed out after ${deadlineMs} ms (deadline)`)), deadlineMs);
    });
    try {
      return await Promise.race([fn(), deadline]);
    } catch (err) {
      const message = (err as Error).message ?? String(err);
      events.onCommandError?.(/timed out/i.test(message) ? 'timeout' : 'error');
      throw new StoreUnavailableError(`redis: ${message}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
  }

  const keyOf = (apiKey: string) => `${prefix}key:${apiKey}`;

  function decode(apiKey: string, raw: string | null): KeyRecord | null {
    if (raw === null) return null;
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      deps.logger.error({ apiKeyPrefix: apiKey.slice(0, 6) }, 'corrupt key record in redis (bad JSON); treating as unknown');
      return null;
    }
    const { record, errors } = parseKeyRecord(parsed, 'redis key');
    if (!record) {
      deps.logger.error({ errors }, 'invalid key record in redis; treating as unknown');
      return null;
    }
    return record;
  }

  return {
    kind: 'redis',
    client,
    getKey: (apiKey) => run(async () => decode(apiKey, await client.get(keyOf(apiKey))), true),
    listKeys: () =>
      run(async () => {
        const names = await client.smembers(`${prefix}keys`);
        const out: KeyRecord[] = [];
        for (const name of names.sort()) {
          const r = decode(name, await client.get(keyOf(name)));
          if (r) out.push(r);
        }
        return out;
      }),
    putKey: (record) =>
      run(async () => {
        await client.set(keyOf(record.apiKey), serializeKeyRecord(record));
        await client.sadd(`${prefix}keys`, record.apiKey);
        await client.publish(channel, record.apiKey);
      }),
    deleteKey: (apiKey) =>
      run(async () => {
        const n = await client.del(keyOf(apiKey));
        await client.srem(`${prefix}keys`, apiKey);
        await client.publish(channel, apiKey);
        return n > 0;
      }),
    recordNonce: (apiKey, nonce, ttlMs) =>
      run(async () => (await client.set(`${prefix}nonce:${apiKey}:${nonce}`, '1', 'PX', ttlMs, 'NX')) === 'OK', true),
    onKeyChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    ping: () =>
      run(async () => {
        await client.ping();
      }, true),
    async close() {
      listeners.clear();
      await Promise.allSettled([client.quit(), subscriber.quit()]);
      client.disconnect();
      subscriber.disconnect();
    },
  };
}
