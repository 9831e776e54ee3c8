import type { Logger } from 'pino';
import type { Clock } from '../../../clock.js';

/** How often a connection that stays down is reported again. */
export const REDIS_OUTAGE_LOG_INTERVAL_MS = 10_000;

export interface RedisOutageLog {
  /** The connection failed or closed (ioredis 'error' / 'close'); `err` when there was one. */
  down(conn: string, err?: Error): void;
  /** The connection is ready again. */
  up(conn: string): void;
  /** Keygate is closing its connections itself: what follows is not an outage. */
  stop(): void;
}

/** The three lines of an outage; a connection's by default, or another retried read's (the owners' limits). */
export interface OutageMessages {
  readonly down: string;
  readonly stillDown: string;
  readonly up: string;
}
const CONNECTION_MESSAGES: OutageMessages = {
  down: 'redis connection down',
  stillDown: 'redis still down',
  up: 'redis reconnected',
};

/**
 * A Redis outage in a few lines instead of a flood: ioredis reports every failed reconnect (every 0.5 s,
 * per connection), which made ≈4 warnings a second and nothing when Redis came back. Per connection:
 * one `redis connection down` warning when it goes, one `redis still down` per interval while it stays
 * down (how long, how many failures since the last line, the last error), and one `redis reconnected`
 * when it is back. The state itself is in keygate_redis_up and /readyz.
 */
export function createRedisOutageLog(
  options: { intervalMs?: number; messages?: OutageMessages },
  deps: { logger: Logger; clock: Clock },
): RedisOutageLog {
  const intervalMs = options.intervalMs ?? REDIS_OUTAGE_LOG_INTERVAL_MS;
  const messages = options.messages ?? CONNECTION_MESSAGES;
  const outages = new Map<string, { since: number; lastLine: number; failures: number; err: string | undefined }>();
  let stopped = false;
  return {
    down(conn, err) {
      if (stopped) return;
      const now = deps.clock.nowMs();
      const outage = outages.get(conn);
      if (outage === undefined) {
        outages.set(conn, { since: now, lastLine: now, failures: 0, err: err?.message });
        deps.logger.warn({ conn, err: err?.message }, messages.down);
        return;
      }
      if (err === undefined) return; // the 'close' after an 'error': the same failure
      outage.failures++;
      outage.err = err.message;
      if (now - outage.lastLine < intervalMs) return;
      deps.logger.warn(
        { conn, err: outage.err, downForMs: now - outage.since, failures: outage.failures },
        messages.stillDown,
      );
      outage.lastLine = now;
      outage.failures = 0;
    },
    up(conn) {
      const outage = outages.get(conn);
      if (outage === undefined) return;
      outages.delete(conn);
      if (!stopped) deps.logger.info({ conn, downForMs: deps.clock.nowMs() - outage.since }, messages.up);
    },
    stop() {
      stopped = true;
    },
  };
}
