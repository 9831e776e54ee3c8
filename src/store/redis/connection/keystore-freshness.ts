// Tested in test/e2e/regions-staleness.test.ts, test/e2e/regions-home.test.ts.
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { KeystoreStaleError } from '../../store.js';
import type { RedisClient } from './redis-connection.js';

/** How often each instance writes its heartbeat through the keystore master, in ms. */
export const FRESHNESS_HEARTBEAT_MS = 250;

/**
 * The heartbeat, one write script on the keystore master: a bare PUBLISH would still succeed on a master cut off
 * by min-replicas-to-write (PUBLISH is no write), while this script's SET is refused there, so a master that no
 * longer replicates sends no heartbeat. The PUBLISH is replicated with the SET, on the one ordered stream from
 * master to replica that also carries every key change and its change message: a heartbeat heard on the replica
 * proves every change acknowledged before it was sent has arrived there too.
 * KEYS: 1 this instance's heartbeat name. ARGV: 1 "<instanceId> <seq>" · 2 PX ms · 3 heartbeat channel.
 */
export const FRESHNESS_SCRIPT = `
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[1])
return 1
`;

export interface KeystoreFreshness {
  /** The channel the subscriber must subscribe to (with the change channel). */
  readonly channel: string;
  /** A message on the subscriber: true when it was a heartbeat (this instance's or another's). */
  heard(channel: string, message: string): boolean;
  /** undefined while fresh; the refusal every admit gets while stale (and before the first heartbeat is heard). */
  refusal(): KeystoreStaleError | undefined;
  /** Seconds since the newest own heartbeat heard back was sent (Infinity before the first one): the gauge. */
  stalenessSeconds(): number;
  stop(): void;
}

/**
 * Proves this region's copy of the keystore is fresh. Every FRESHNESS_HEARTBEAT_MS the instance runs
 * FRESHNESS_SCRIPT on the keystore master and notes when it sent sequence number n, on its own monotonic
 * clock; it listens on its region's keystore replica. Freshness is the send time of the newest own heartbeat
 * heard back: no clock of another host enters. While now − that exceeds `maxStalenessMs`, `refusal` answers
 * KeystoreStaleError. `onTick` rides the timer (the request-state groups' epoch reads).
 */
export function createKeystoreFreshness(
  options: { prefix: string; instanceId: string; maxStalenessMs: number; intervalMs?: number },
  deps: {
    /** The keystore master's connection (the key operations'): where the heartbeat is written. */
    master: RedisClient;
    run<T>(fn: () => Promise<T>): Promise<T>;
    logger: Logger;
    /** Monotonic ms (tests drive it); performance.now() by default. */
    nowMs?: () => number;
    onTick?: () => void;
    /**
     * The first own heartbeat heard, or one heard after a gap in the sequence: messages were lost on the way to
     * the replica (a full resynchronisation replaces its data without replaying change messages), so every
     * cached key and the known-keys filter must be rebuilt from the replica.
     */
    onGap?: () => void;
  },
): KeystoreFreshness {
  const channel = `${options.prefix}keystore-heartbeats`;
  const name = `${options.prefix}{keystore}:heartbeat:${options.instanceId}`;
  const intervalMs = options.intervalMs ?? FRESHNESS_HEARTBEAT_MS;
  const now = deps.nowMs ?? (() => performance.now());
  deps.master.defineCommand('keygateFreshness', { numberOfKeys: 1, lua: FRESHNESS_SCRIPT });
  const script = (deps.master as unknown as { keygateFreshness(...args: Array<string | number>): Promise<number> })
    .keygateFreshness;
  const own = `${options.instanceId} `;
  /** seq → when it was sent; entries up to the newest heard are dropped (the stream is ordered). */
  const sent = new Map<number, number>();
  let seq = 0;
  let lastHeard = 0;
  let freshAt = -Infinity;
  let wasStale = true;
  let failing = false;

  const timer = setInterval(() => {
    const n = ++seq;
    sent.set(n, now());
    // A heartbeat never heard (master cut off, replica behind) stays only until the bound has passed.
    for (const [s, at] of sent)
      if (now() - at > options.maxStalenessMs * 4) sent.delete(s);
      else break;
    deps
      .run(() => script.call(deps.master, name, `${own}${n}`, Math.max(options.maxStalenessMs * 4, 5_000), channel))
      .then(
        () => (failing = false),
        (err: Error) => {
          if (!failing) deps.logger.warn({ err: err.message }, 'keystore heartbeat not written (keystore master)');
          failing = true;
        },
      );
    deps.onTick?.();
    const stale = now() - freshAt > options.maxStalenessMs;
    if (stale !== wasStale) {
      wasStale = stale;
      if (stale)
        deps.logger.error(
          { boundMs: options.maxStalenessMs },
          "keystore copy stale: no own heartbeat heard back on this region's keystore replica within the bound; authenticated requests get 503 keystore_stale",
        );
      else deps.logger.info('keystore copy fresh again');
    }
  }, intervalMs);
  timer.unref();

  return {
    channel,
    heard(ch, message) {
      if (ch !== channel) return false;
      if (!message.startsWith(own)) return true;
      const n = Number(message.slice(own.length));
      if (n !== lastHeard + 1 || lastHeard === 0) deps.onGap?.();
      if (n > lastHeard) lastHeard = n;
      const at = sent.get(n);
      if (at !== undefined && at > freshAt) freshAt = at;
      for (const s of sent.keys())
        if (s <= n) sent.delete(s);
        else break;
      return true;
    },
    refusal() {
      const age = now() - freshAt;
      if (age <= options.maxStalenessMs) return undefined;
      return new KeystoreStaleError(
        `keystore copy stale: ${Number.isFinite(age) ? `${Math.round(age)} ms since` : 'no'} own heartbeat heard back (bound ${options.maxStalenessMs} ms)`,
      );
    },
    stalenessSeconds: () => (now() - freshAt) / 1_000,
    stop: () => clearInterval(timer),
  };
}
