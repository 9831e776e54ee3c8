// Tested in test/unit/change-feed-states.test.ts (its table), test/e2e/redis-subscriber.test.ts, test/e2e/revocation-propagation.test.ts, test/e2e/redis-cluster-failover.test.ts, test/adversarial/redis-faults.test.ts.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { KeyChangeListener } from '../store.js';
import { feedTransition, isSubscribed, type FeedEffect, type FeedEvent, type FeedState } from './change-feed-states.js';
import { createKnownKeysBuilder } from './known-keys-builder.js';
import type { RedisClient } from './connection/redis-connection.js';
import { HEARTBEAT_MISSES, HEARTBEAT_MS, startSubscriberHeartbeat } from './connection/subscriber-heartbeat.js';

export interface ChangeFeed {
  /** The state now (change-feed-states.ts). */
  state(): FeedState;
  /** Store.subscribed(): change messages are trusted (`subscribed` or `reconfirming`). */
  subscribed(): boolean;
  /** Store.mayHaveKey(): false only for a name the filter in force has never seen, while subscribed. */
  mayHaveKey(apiKey: string): boolean;
  onKeyChange(listener: KeyChangeListener): () => void;
  /** Every cached key may be stale (a connection came back): listeners get `null`, then onReconnect. */
  flush(): void;
  /**
   * Every key may have changed (the keystore was emptied, keystore-epoch.ts): as a `*` change message,
   * the known-keys filter is rebuilt and every key cache flushed.
   */
  everythingChanged(): void;
  /** A key this process just wrote: known at once, before its change message comes back. */
  noteKnown(apiKey: string): void;
  /** The subscriber connection became ready / closed (redis-connections.ts). */
  subscriberReady(): void;
  subscriberClosed(): void;
  /** The store is closing: no filter trusted, no listener called, no heartbeat sent. */
  stop(): void;
}

/**
 * The change feed: how a key change made anywhere reaches this process's key cache. It subscribes to the
 * change channel, proves the subscription with its own heartbeats (subscriber-heartbeat.ts), keeps the
 * known-keys filter (known-keys-builder.ts) and calls the key-change listeners. Its states and transitions
 * are change-feed-states.ts (and docs/redis.md "The change feed"); this file carries them out: every event
 * goes through `handle`, the one place the state changes.
 */
export function createChangeFeed(
  /** `alsoChannels`: other channels subscribed with the change channel, in the same SUBSCRIBE (their messages are others' to read). */
  options: { channel: string; alsoChannels?: readonly string[]; heartbeatMs?: number },
  deps: {
    subscriber: RedisClient;
    logger: Logger;
    /** Publishes on the change channel through the command connection, under the command deadline. */
    publish(message: string): Promise<unknown>;
    countKeys(): Promise<number>;
    namesAfter(after: string | undefined, limit: number): Promise<string[]>;
    onConnectionState?: (up: boolean, connection: 'subscriber') => void;
    onReconnect?: () => void;
    /** A Redis connection itself is down (redis-reachability.ts): the outage lines say so already. */
    connectionDown(): boolean;
    /** Runs with every heartbeat (keystore-epoch.ts reads its marker). */
    onHeartbeat?: () => void;
  },
): ChangeFeed {
  const { channel } = options;
  const channels = [channel, ...(options.alsoChannels ?? [])];
  const { subscriber, logger } = deps;
  const listeners = new Set<KeyChangeListener>();
  let state: FeedState = 'unsubscribed';
  const emit = (apiKey: string | null) => {
    for (const l of listeners) l(apiKey);
  };
  const flush = () => {
    emit(null);
    deps.onReconnect?.();
  };
  const everythingChanged = () => {
    known.rebuild();
    emit(null);
  };
  const known = createKnownKeysBuilder({
    logger,
    subscribed: () => isSubscribed(state),
    countKeys: deps.countKeys,
    namesAfter: deps.namesAfter,
  });

  function handle(event: FeedEvent, err?: Error) {
    const step = feedTransition(state, event, subscriber.status === 'ready');
    // With a connection itself down, nothing is heard anyway and the outage lines say why: no blame on the subscriber.
    if (event === 'heartbeat-lost' && !deps.connectionDown())
      logger.warn('change messages not heard on the subscriber: key caches flushed, subscriber moved');
    if (event === 'heartbeat-heard' && step.effects.length > 0)
      logger.info('change messages heard again on the subscriber');
    state = step.next;
    for (const effect of step.effects) carryOut(effect, err);
  }
  function carryOut(effect: FeedEffect, err: Error | undefined) {
    switch (effect) {
      case 'subscribe':
        // Subscribed means subscribed: SUBSCRIBE is sent on every (re)connect and only its reply marks
        // the subscriber up. Until then key caches re-read keys after a short bound (Store.subscribed).
        return void subscriber
          .subscribe(...channels)
          .then(() => handle('confirmed'))
          .catch((e: Error) => handle('failed', e));
      case 'rebuild-filter':
        return known.rebuild();
      case 'forget-filter':
        // Changes may now be missed: the filter is trusted again only once rebuilt after the next confirmation.
        return known.forget();
      case 'report-up':
        return deps.onConnectionState?.(true, 'subscriber');
      case 'report-down':
        return deps.onConnectionState?.(false, 'subscriber');
      case 'flush-caches':
        // Anything may have changed while we were not listening: flush caches.
        return flush();
      case 'move-subscriber':
        // Connected, or stuck in its ready check on the silent node: reconnect. A client that is
        // already reconnecting (Redis down) does so by itself.
        if (subscriber.status === 'ready' || subscriber.status === 'connect') subscriber.disconnect(true);
        return;
      case 'warn-and-retry':
        logger.warn({ err: err?.message }, 'redis subscribe failed; retrying');
        setTimeout(() => subscriber.status === 'ready' && handle('ready'), 500).unref();
        return;
    }
  }

  subscriber.on('message', (ch: string, message: string) => {
    if (ch !== channel || heartbeat.heard(message)) return;
    if (message === '*') return everythingChanged();
    known.note(message);
    emit(message);
  });

  // A subscriber on a node that hangs hears nothing and reports nothing (subscriber-heartbeat.ts):
  // when its own heartbeats stop arriving, stop trusting cached keys and move the subscriber.
  const heartbeat = startSubscriberHeartbeat(
    { intervalMs: options.heartbeatMs ?? HEARTBEAT_MS, misses: HEARTBEAT_MISSES, mark: randomBytes(6).toString('hex') },
    {
      publish: deps.publish,
      onLost: () => handle('heartbeat-lost'),
      onHeard: () => handle('heartbeat-heard'),
      ...(deps.onHeartbeat && { onTick: deps.onHeartbeat }),
    },
  );

  return {
    state: () => state,
    subscribed: () => isSubscribed(state),
    mayHaveKey: (apiKey) => !isSubscribed(state) || known.mayHave(apiKey),
    onKeyChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    flush,
    everythingChanged,
    noteKnown: (apiKey) => known.note(apiKey),
    subscriberReady: () => handle('ready'),
    subscriberClosed: () => handle('close'),
    stop() {
      known.forget();
      listeners.clear();
      heartbeat.stop();
    },
  };
}
