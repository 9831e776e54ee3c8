// Tested in test/e2e/streams.test.ts, test/e2e/stream-revocation.test.ts.
import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import { prepareKey, type PreparedKey } from '../../keys/prepared-key.js';
import type { KeyRecord } from '../../keys/key-record.js';
import type { StreamCloseReason, StreamMetrics } from '../../observe/stream-metrics.js';
import { authorize } from '../../pipeline/authorize.js';
import type { RouteMatch } from '../../policy/routes.js';
import type { Store } from '../../store/store.js';
import { CLOSE_GOING_AWAY, CLOSE_POLICY, type StreamRelay } from './stream-relay.js';

export interface StreamRegistryOptions {
  /** Open (or opening) streams one key may hold on this instance: KEYGATE_MAX_STREAMS_PER_KEY. */
  readonly maxPerKey: number;
  /** A stream with no byte either way for this long is closed (1001): KEYGATE_STREAM_IDLE_TIMEOUT_MS. */
  readonly idleTimeoutMs: number;
  /** How often the registry sweeps for idle streams, and re-reads keys while key changes may go unheard. */
  readonly sweepMs?: number;
}

/**
 * Streams counted beyond this process (KEYGATE_WORKERS > 1: the primary counts every worker's, so the
 * limit is per instance, as its name says). `take` answers whether the instance has room for one more
 * stream of the key and, if so, holds it; `give` hands it back. Without one, this process's count is the instance's.
 */
export interface SharedStreamCount {
  take(apiKey: string): Promise<boolean>;
  give(apiKey: string): void;
}

/** What a stream was admitted with: re-checked against its key on every change of that key. */
export interface AdmittedStream {
  readonly relay: StreamRelay;
  /** The caller's IP as authorization saw it (the key's allow-list is checked against it again). */
  readonly ip: string | undefined;
  readonly route: RouteMatch;
  /** Told once why the stream ended (tracing: the upgrade's span gets the event and ends). */
  readonly onEnd?: ((reason: StreamCloseReason) => void) | undefined;
  /** The credential that verified the token (VerifyKey.id): the stream ends when its key no longer holds it. */
  readonly credential: string;
}

/** A slot held for a key between its admission and its upstream's 101 (so the limit counts handshakes too). */
export interface StreamSlot {
  /** The stream is joined: count it, and check its key once more (a change may have landed meanwhile). */
  activate(stream: AdmittedStream): void;
  /** The handshake failed: give the slot back. */
  release(): void;
}

export interface StreamRegistry {
  /** A slot for one more stream of `apiKey`, or undefined when the key holds maxPerKey already (on the instance). */
  reserve(apiKey: string): Promise<StreamSlot | undefined>;
  /** Streams open now. */
  readonly size: number;
  /** Shutdown: every stream gets 1001 and its connections end; resolves once all have closed. */
  closeAll(): Promise<void>;
  /** Stops listening for key changes and sweeping (after closeAll). */
  close(): void;
}

interface KeyStreams {
  readonly streams: Set<AdmittedStream>;
  pending: number;
  /** A re-read of the key is under way; `again` asks for one more once it is done. */
  checking: boolean;
  again: boolean;
  expiry: NodeJS.Timeout | undefined;
}

/** setTimeout's longest delay (about 24.8 days); a later expiry re-arms when it fires. */
const MAX_DELAY_MS = 2 ** 31 - 1;

/**
 * The open streams of this instance, by key. It counts them for the per-key limit, sweeps idle ones,
 * and closes a key's streams (1008) when the key stops being good: every key change any instance
 * makes reaches `store.onKeyChange`, and each one makes the registry read the key again from the
 * store and judge every stream of that key as authorization would now: revoked or deleted
 * (`revoked`), past its expiry (`expired`, also on a timer at the expiry), or the route's scope gone
 * or the allow-list no longer admitting the caller (`scope`), or the credential that opened the stream
 * gone from the key or past its rotation grace (`rotated`, also on a timer at the grace's end). While the store cannot promise that
 * every change is heard (`subscribed()` false), the keys of open streams are read again every sweep.
 */
export function createStreamRegistry(
  options: StreamRegistryOptions,
  deps: { store: Store; clock: Clock; logger: Logger; metrics: StreamMetrics; shared?: SharedStreamCount },
): StreamRegistry {
  const { store, clock, logger, metrics, shared } = deps;
  const byKey = new Map<string, KeyStreams>();
  let open = 0;
  let shuttingDown = false;
  let allClosed: (() => void) | undefined;

  const unsubscribe = store.onKeyChange((apiKey) => {
    if (apiKey === null) for (const k of byKey.keys()) void recheck(k);
    else if (byKey.has(apiKey)) void recheck(apiKey);
  });

  const sweep = setInterval(() => {
    const idleBefore = performance.now() - options.idleTimeoutMs;
    for (const entry of byKey.values())
      for (const s of entry.streams)
        if (s.relay.lastActive < idleBefore) s.relay.close(CLOSE_GOING_AWAY, 'idle timeout', 'idle');
    // A change made while the subscription was down was not heard: read the keys again.
    if (!store.subscribed()) for (const k of byKey.keys()) void recheck(k);
  }, options.sweepMs ?? 1_000);
  sweep.unref();

  function entryOf(apiKey: string): KeyStreams {
    let entry = byKey.get(apiKey);
    if (entry === undefined) {
      entry = { streams: new Set(), pending: 0, checking: false, again: false, expiry: undefined };
      byKey.set(apiKey, entry);
    }
    return entry;
  }

  function dropIfEmpty(apiKey: string, entry: KeyStreams) {
    if (entry.streams.size > 0 || entry.pending > 0 || byKey.get(apiKey) !== entry) return;
    clearTimeout(entry.expiry);
    byKey.delete(apiKey);
  }

  /** Reads the key again and closes every stream it no longer admits; coalesces changes that arrive meanwhile. */
  async function recheck(apiKey: string): Promise<void> {
    const entry = byKey.get(apiKey);
    if (entry === undefined) return;
    if (entry.checking) {
      entry.again = true;
      return;
    }
    entry.checking = true;
    try {
      do {
        entry.again = false;
        judge(apiKey, entry, await store.getKey(apiKey));
      } while (entry.again);
    } catch (err) {
      // The store did not answer: the streams stay as they are and the key is read again shortly
      // (the sweep does it too while the subscription is down).
      logger.warn({ err: (err as Error).message }, 'stream key re-check failed; retrying');
      const retry = setTimeout(() => void recheck(apiKey), 500);
      retry.unref();
    } finally {
      entry.checking = false;
    }
  }

  function judge(apiKey: string, entry: KeyStreams, record: KeyRecord | null) {
    if (record === null || record.state !== 'active') return closeKey(entry, 'revoked', 'key revoked');
    let key: PreparedKey;
    try {
      key = prepareKey(record);
    } catch {
      // A record authentication could not use either: fail closed.
      return closeKey(entry, 'revoked', 'key unusable');
    }
    const now = clock.nowMs();
    if (now >= key.expiresAtMs) return closeKey(entry, 'expired', 'key expired');
    // The next moment a stream may stop being good on its own: the key's expiry, or the end of the
    // rotation grace of a credential a stream was opened with.
    let next = key.expiresAtMs;
    for (const s of entry.streams) {
      const credential = key.verifyKeys.find((k) => k.id === s.credential);
      if (credential === undefined || credential.validUntilMs <= now)
        s.relay.close(CLOSE_POLICY, 'credential rotated out', 'rotated');
      else if (!authorize(key, s.ip, s.route, 'deny').ok)
        s.relay.close(CLOSE_POLICY, 'key no longer authorized', 'scope');
      else if (credential.validUntilMs < next) next = credential.validUntilMs;
    }
    clearTimeout(entry.expiry);
    entry.expiry = undefined;
    if (Number.isFinite(next)) {
      entry.expiry = setTimeout(() => void recheck(apiKey), Math.min(next - now, MAX_DELAY_MS));
      entry.expiry.unref();
    }
  }

  function closeKey(entry: KeyStreams, reason: StreamCloseReason, text: string) {
    for (const s of entry.streams) s.relay.close(CLOSE_POLICY, text, reason);
  }

  function ended(apiKey: string, entry: KeyStreams, stream: AdmittedStream, reason: StreamCloseReason) {
    entry.streams.delete(stream);
    open--;
    metrics.open.dec();
    metrics.closed[reason].inc();
    stream.onEnd?.(reason);
    dropIfEmpty(apiKey, entry);
    if (open === 0) allClosed?.();
  }

  return {
    async reserve(apiKey) {
      let entry = entryOf(apiKey);
      if (entry.streams.size + entry.pending >= options.maxPerKey) {
        dropIfEmpty(apiKey, entry);
        return undefined;
      }
      if (shared !== undefined) {
        entry.pending++;
        const room = await shared.take(apiKey).catch(() => false);
        entry.pending--;
        dropIfEmpty(apiKey, entry);
        if (!room) return undefined;
        entry = entryOf(apiKey);
      }
      const give = () => shared?.give(apiKey);
      entry.pending++;
      let settled = false;
      return {
        activate(stream) {
          if (settled) return;
          settled = true;
          entry.pending--;
          entry.streams.add(stream);
          open++;
          metrics.open.inc();
          stream.relay.onEnd = (reason) => {
            give();
            ended(apiKey, entry, stream, reason);
          };
          if (shuttingDown) stream.relay.close(CLOSE_GOING_AWAY, 'shutting down', 'shutdown');
          // The key was read at authentication; a change since then may not have found this stream yet.
          else void recheck(apiKey);
        },
        release() {
          if (settled) return;
          settled = true;
          give();
          entry.pending--;
          dropIfEmpty(apiKey, entry);
        },
      };
    },
    get size() {
      return open;
    },
    closeAll() {
      shuttingDown = true;
      if (open === 0) return Promise.resolve();
      const done = new Promise<void>((resolve) => (allClosed = resolve));
      for (const entry of byKey.values())
        for (const s of entry.streams) s.relay.close(CLOSE_GOING_AWAY, 'shutting down', 'shutdown');
      return done;
    },
    close() {
      unsubscribe();
      clearInterval(sweep);
      for (const entry of byKey.values()) clearTimeout(entry.expiry);
    },
  };
}
