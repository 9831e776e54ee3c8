/**
 * The change feed's states and transitions, written once (docs/redis.md "The change feed" has the same table;
 * test/unit/change-feed-states.test.ts checks every cell). change-feed.ts runs it; this file only decides.
 *
 * A cached key may be trusted past the key cache's short TTL only while the feed is `subscribed` or
 * `reconfirming`: then every change reaches this process as a message and drops the cached copy at once.
 *
 *   state          SUBSCRIBE   how long a cached key is trusted       the known-keys filter
 *   unsubscribed   none due    the short TTL (key cache ttlMs)       not in force: every unknown name read
 *   confirming     reply due   the short TTL                          not in force
 *   subscribed     none due    until its change message or a flush    in force once built
 *   reconfirming   reply due   until its change message or a flush    in force once built
 *   lost           none due    the short TTL; caches were flushed     not in force
 *
 *   event (guard)            unsubscribed    confirming       subscribed       reconfirming    lost
 *   ready                    confirming S    ·                reconfirming S   ·               confirming S
 *   confirmed (ready)        subscribed RUL  subscribed RUL   subscribed RUL   subscribed RUL  subscribed RUL
 *   confirmed (not ready)    ·               unsubscribed     ·                subscribed      ·
 *   failed                   · W             unsubscribed W   · W              subscribed W    · W
 *   close                    · FD            · FD             unsubscribed FD  confirming FD   · FD
 *   heartbeat-lost           lost FLM        lost FLM         lost FDLM        lost FDLM       lost FLM
 *   heartbeat-heard (ready)  subscribed RUL  reconfirming RUL ·                ·               subscribed RUL
 *   heartbeat-heard (not r.) ·               ·                ·                ·               ·
 *   (· = state unchanged)
 * What happens, in this order: S send SUBSCRIBE; R rebuild the known-keys filter; U report the subscriber up;
 * F forget the filter; D report the subscriber down; L flush every key cache (listeners get `null`, then
 * onReconnect); M move the subscriber (reconnect it if connected or stuck in its ready check); W warn, and 500 ms
 * later send `ready` again if the connection is ready.
 * "ready": the subscriber connection is ready when the event is handled.
 *
 * Why `reconfirming`: after a loss the subscriber reconnects and sends SUBSCRIBE; a heartbeat heard before its reply
 * (ioredis re-subscribes by itself) already proves the feed, and the reply, when it comes, still rebuilds and flushes.
 * A SUBSCRIBE abandoned by `heartbeat-lost` may still be answered later: `confirmed` is handled in every state.
 * Change messages are not transitions: in every state a key's message drops it from the caches (and adds it to the
 * filter), and `*` flushes them all and rebuilds the filter.
 */
export type FeedState = 'unsubscribed' | 'confirming' | 'subscribed' | 'reconfirming' | 'lost';

export type FeedEvent =
  /** The subscriber connection became ready, or the retry after a failed SUBSCRIBE came due while it is. */
  | 'ready'
  /** SUBSCRIBE was answered. */
  | 'confirmed'
  /** SUBSCRIBE failed. */
  | 'failed'
  /** The subscriber connection closed. */
  | 'close'
  /** This process's heartbeats went unheard (subscriber-heartbeat.ts). */
  | 'heartbeat-lost'
  /** A heartbeat was heard again after a loss. */
  | 'heartbeat-heard';

export type FeedEffect =
  | 'subscribe'
  | 'rebuild-filter'
  | 'report-up'
  | 'forget-filter'
  | 'report-down'
  | 'flush-caches'
  | 'move-subscriber'
  | 'warn-and-retry';

export interface FeedStep {
  readonly next: FeedState;
  /** In the order they are carried out. */
  readonly effects: readonly FeedEffect[];
}

/** The states in which change messages are trusted (Store.subscribed()). */
export const isSubscribed = (state: FeedState) => state === 'subscribed' || state === 'reconfirming';
/** The states in which a SUBSCRIBE's reply is due (a second one is not sent). */
const replyDue = (state: FeedState) => state === 'confirming' || state === 'reconfirming';
const stay = (state: FeedState, effects: readonly FeedEffect[] = []): FeedStep => ({ next: state, effects });
const UP: readonly FeedEffect[] = ['rebuild-filter', 'report-up', 'flush-caches'];

/** The next state and what to do, for `event` in `state`; `ready`: is the subscriber connection ready now. */
export function feedTransition(state: FeedState, event: FeedEvent, ready: boolean): FeedStep {
  const subscribed = isSubscribed(state);
  switch (event) {
    case 'ready':
      if (replyDue(state)) return stay(state);
      return { next: subscribed ? 'reconfirming' : 'confirming', effects: ['subscribe'] };
    case 'confirmed':
      if (ready) return { next: 'subscribed', effects: UP };
      return stay(state === 'confirming' ? 'unsubscribed' : state === 'reconfirming' ? 'subscribed' : state);
    case 'failed':
      return stay(state === 'confirming' ? 'unsubscribed' : state === 'reconfirming' ? 'subscribed' : state, [
        'warn-and-retry',
      ]);
    case 'close':
      return stay(state === 'subscribed' ? 'unsubscribed' : state === 'reconfirming' ? 'confirming' : state, [
        'forget-filter',
        'report-down',
      ]);
    case 'heartbeat-lost':
      return {
        next: 'lost',
        effects: subscribed
          ? ['forget-filter', 'report-down', 'flush-caches', 'move-subscriber']
          : ['forget-filter', 'flush-caches', 'move-subscriber'],
      };
    case 'heartbeat-heard':
      if (subscribed || !ready) return stay(state);
      return { next: state === 'confirming' ? 'reconfirming' : 'subscribed', effects: UP };
  }
}
