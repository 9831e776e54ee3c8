/** Defaults: a heartbeat a second; 3 unheard in a row and the subscription is lost (≤ 4 s after it fell silent). */
export const HEARTBEAT_MS = 1_000;
export const HEARTBEAT_MISSES = 3;

/** Heartbeats share the change channel; `~` is outside the apiKey alphabet, so none is taken for a key. */
const PREFIX = '~heartbeat:';

export interface SubscriberHeartbeatOptions {
  /** How often this process publishes its heartbeat, in ms. */
  readonly intervalMs: number;
  /** Heartbeats published without being heard, in a row, before the subscription is declared lost. */
  readonly misses: number;
  /** Tells this process's heartbeats from other processes' (which are ignored). */
  readonly mark: string;
}

export interface SubscriberHeartbeat {
  /** A message from the change channel: true when it is a heartbeat (of any process), which is no key change. */
  heard(message: string): boolean;
  stop(): void;
}

/**
 * Proves the change subscription works end to end: every interval this process PUBLISHes a heartbeat
 * on the change channel (through the command connection) and expects to hear it on its subscriber.
 * A subscriber whose node hangs (frozen, a partition that drops packets) closes nothing and reports
 * nothing: its connection looks healthy while every change message is lost, so a revoked key would
 * stay cached. When `misses` heartbeats in a row were not heard, `onLost` runs (the store stops
 * trusting its cache and moves the subscriber); the next heartbeat heard runs `onHeard`. A heartbeat
 * whose PUBLISH failed counts as unheard too: in a Cluster it may have gone to the node that hangs,
 * and with Redis down nothing is heard anyway (the subscriber is then already down; the flush is harmless).
 */
export function startSubscriberHeartbeat(
  options: SubscriberHeartbeatOptions,
  deps: {
    publish(message: string): Promise<unknown>;
    onLost(): void;
    onHeard(): void;
    /** Every interval too: other checks that ride on the heartbeat (the keystore's epoch, keystore-epoch.ts). */
    onTick?(): void;
  },
): SubscriberHeartbeat {
  const own = `${PREFIX}${options.mark}:`;
  let seq = 0;
  let heardSeq = 0; // the last own seq heard
  let misses = 0;
  let lost = false;
  const timer = setInterval(() => {
    misses = seq > heardSeq ? misses + 1 : 0;
    // Again every `misses` intervals while nothing is heard: a subscriber moved onto another
    // node that hangs too is moved again.
    if (misses >= options.misses) {
      lost = true;
      misses = 0;
      deps.onLost();
    }
    deps.publish(`${own}${++seq}`).catch(() => {});
    deps.onTick?.();
  }, options.intervalMs);
  timer.unref();
  return {
    heard(message) {
      if (!message.startsWith(PREFIX)) return false;
      if (message.startsWith(own)) {
        const n = Number(message.slice(own.length));
        if (n > heardSeq) heardSeq = n;
        misses = 0;
        if (lost) {
          lost = false;
          deps.onHeard();
        }
      }
      return true;
    },
    stop: () => clearInterval(timer),
  };
}
