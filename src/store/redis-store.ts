import type { Logger } from 'pino';
import type { RedisConnection } from '../config/redis-settings.js';
import { ADMIT_SCRIPT } from './admit-script.js';
import { createRedisClient, watchSentinelFailover, type RedisClient } from './redis-connection.js';
import { USAGE_DAYS, type KeyUsage } from '../keys/key-usage.js';
import type { SecretCipher } from '../keys/secret-cipher.js';
import { createRedisKeyRecords } from './redis-key-records.js';
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
 *   {prefix}{keystore}:…              key records, their indexes and the audit stream (redis-key-records.ts)
 *   {prefix}{<apiKey>}:nonce:<n>      replay guard entry, SET NX PX         ┐ request-path state of one key:
 *   {prefix}{<apiKey>}:tat            GCRA state (µs), PX until it passes   │ one hash slot, written by one
 *   {prefix}{<apiKey>}:usage          hash: last (ms), YYYY-MM-DD → count   ┘ script (admit-script.ts)
 *   {prefix}key-events                pub/sub channel, message = apiKey or "*"
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
  const stopWatching =
    connection.mode === 'sentinel'
      ? watchSentinelFailover(connection, () => {
          deps.logger.info('sentinel reports a new master; reconnecting');
          // Only a ready connection: one that is (re)connecting already asks the sentinels.
          for (const c of [client, subscriber]) if (c.status === 'ready') c.disconnect(true);
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
        // Records of the layout before issue 27, if any: moved at each connect (a no-op once moved).
        records
          .migrateLegacy()
          .catch((err: Error) => deps.logger.warn({ err: err.message }, 'legacy key migration failed'));
      }
      // Anything may have changed while we were away: flush caches.
      emit(null);
      events.onReconnect?.();
    });
    conn.on('close', () => events.onConnectionState?.(false, label));
  }
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

  const records = createRedisKeyRecords(
    { prefix, channel, ...(options.cipher && { cipher: options.cipher }) },
    { client, logger: deps.logger },
  );
  // The {…} hash tag puts every name of one key's request-path state in one Cluster slot.
  const stateOf = (apiKey: string) => `${prefix}{${apiKey}}:`;
  // A deleted key's rate-limit state and usage: another slot than the record, so after the
  // commit (a leftover is harmless: nothing reads it without the record).
  const dropRequestState = async (apiKeys: readonly string[]) => {
    for (const k of apiKeys) await client.del(`${stateOf(k)}tat`, `${stateOf(k)}usage`);
  };
  client.defineCommand('keygateAdmit', { numberOfKeys: 3, lua: ADMIT_SCRIPT });
  const admitScript = (
    client as unknown as { keygateAdmit(...args: Array<string | number>): Promise<number[]> }
  ).keygateAdmit.bind(client);

  return {
    kind: 'redis',
    client,
    getKey: (apiKey) => run(() => records.getKey(apiKey)),
    readKey: (apiKey) => run(() => records.readKey(apiKey)),
    listKeys: () => run(() => records.listKeys()),
    commitKeyChanges: (commit) =>
      run(async () => {
        const result = await records.commitKeyChange(commit);
        if (result.ok) await dropRequestState(commit.writes.filter((w) => w.next === null).map((w) => w.apiKey));
        return result;
      }),
    putKey: (record) =>
      run(async () => {
        await records.commitKeyChange({ writes: [{ apiKey: record.apiKey, next: record }], audit: [] });
      }),
    deleteKey: (apiKey) =>
      run(async () => {
        const existed = (await records.readKey(apiKey)) !== null;
        await records.commitKeyChange({ writes: [{ apiKey, next: null }], audit: [] });
        await dropRequestState([apiKey]);
        return existed;
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
      run(async () => {
        const k = `${prefix}${name}`;
        // SET NX, then read the winner; a winner that expired in between is claimed again once.
        for (let i = 0; i < 2; i++) {
          if ((await client.set(k, value, 'PX', ttlMs, 'NX')) === 'OK') return null;
          const there = await client.get(k);
          if (there !== null) return there;
        }
        return client.get(k);
      }),
    appendAudit: (entry) => run(() => records.appendAudit(entry)),
    onKeyChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    ping: () =>
      run(async () => {
        await client.ping();
      }),
    countKeys: () => run(() => records.countKeys()),
    async close() {
      listeners.clear();
      stopWatching();
      await Promise.allSettled([client.quit(), subscriber.quit()]);
      client.disconnect();
      subscriber.disconnect();
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
