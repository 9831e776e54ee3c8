// Tested in test/e2e/store-contract.test.ts (onIpBlocked heard by a second Redis store), test/e2e/metering.test.ts (ip_blocked on the other instance).
import type { RedisClient } from './connection/redis-connection.js';

export interface IpBlockListener {
  /** Store.onIpBlocked: blocks announced by any instance, this one included. */
  onIpBlocked(listener: (ipKey: string, blockedUs: number) => void): () => void;
  stop(): void;
}

/**
 * An IP whose failed-authentication budget is empty is announced on `channel` as
 * "<ip or /64> <µs>" (request-state.ts `spendFailedAuth`), so every instance refuses it before any
 * check (src/pipeline/ip-budget.ts). The channel is subscribed by the change feed with its own
 * (change-feed.ts `alsoChannels`, one SUBSCRIBE, one confirmation); this only reads its messages. A
 * malformed message is ignored: it can only come from someone who can write to Redis anyway.
 */
export function createIpBlockListener(
  options: { channel: string },
  deps: { subscriber: RedisClient },
): IpBlockListener {
  const listeners = new Set<(ipKey: string, blockedUs: number) => void>();
  const onMessage = (ch: string, message: string) => {
    if (ch !== options.channel) return;
    const [ipKey = '', us = ''] = message.split(' ');
    const blockedUs = Number(us);
    if (ipKey !== '' && Number.isFinite(blockedUs) && blockedUs > 0) for (const l of listeners) l(ipKey, blockedUs);
  };
  deps.subscriber.on('message', onMessage);
  return {
    onIpBlocked(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    stop() {
      listeners.clear();
      deps.subscriber.off('message', onMessage);
    },
  };
}
