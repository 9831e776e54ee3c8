// Tested in test/unit/redis-reachability.test.ts, test/process/redis-unreachable.test.ts.
import type { Logger } from 'pino';
import type { ConnectionProblem } from '../../store.js';

/**
 * Why a Redis connection failed, in Redis's terms: the vocabulary of `upstreamCause` (docs/running.md
 * "Logs"), plus `auth` and `protocol`. What /readyz answers as `cause` with `redis_unreachable`.
 */
export type RedisCause =
  'refused' | 'dns' | 'unreachable' | 'timeout' | 'tls' | 'reset' | 'auth' | 'protocol' | 'other';

/** What to check for each cause: the second half of the line logged when Redis cannot be reached at start. */
export const REDIS_CAUSE_HINTS: Readonly<Record<RedisCause, string>> = Object.freeze({
  refused: 'connection refused: nothing listens at that address (is Redis running? is the port right?)',
  dns: 'the host name does not resolve (a typo? a Service name outside its namespace?)',
  unreachable: 'no route to that host (a wrong address or network)',
  timeout:
    'no answer within the connect timeout (a firewall or a wrong address; with rediss://, a port that does not speak TLS)',
  tls: 'the TLS handshake failed (certificate, CA or server name; or a TLS port without rediss://)',
  reset: 'the connection was closed at once (a TLS port spoken to without rediss://? a proxy?)',
  auth: 'Redis refused the credentials (the password in KEYGATE_REDIS_URL or KEYGATE_REDIS_PASSWORD)',
  protocol: 'something that is not Redis answered at that address (an HTTP server? a TLS port without rediss://?)',
  other: 'see err',
});

/** Error codes and message prefixes, in order; the first that matches names the cause. */
const CAUSES: ReadonlyArray<readonly [RedisCause, (code: string, message: string) => boolean]> = [
  ['auth', (_c, m) => /^(WRONGPASS|NOAUTH|NOPERM)\b|invalid password|AUTH.*(failed|without any password)/i.test(m)],
  ['refused', (c) => c === 'ECONNREFUSED'],
  ['dns', (c) => c === 'ENOTFOUND' || c === 'EAI_AGAIN' || c === 'EAI_NONAME'],
  ['unreachable', (c) => c === 'EHOSTUNREACH' || c === 'ENETUNREACH' || c === 'EADDRNOTAVAIL'],
  ['timeout', (c, m) => c === 'ETIMEDOUT' || /\bETIMEDOUT\b|timed out/i.test(m)],
  [
    'tls',
    (c, m) =>
      /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_)/.test(c) ||
      c === 'EPROTO' ||
      /\b(TLS|SSL)\b|certificate/i.test(m),
  ],
  ['reset', (c, m) => c === 'ECONNRESET' || c === 'EPIPE' || /Connection is closed/i.test(m)],
  ['protocol', (_c, m) => /Protocol error/i.test(m)],
];

/** The cause of a connection error (ioredis 'error' events: Node socket errors and Redis replies). */
export function redisCause(err: Error): RedisCause {
  const raw = (err as { code?: unknown }).code;
  const code = typeof raw === 'string' ? raw : '';
  for (const [cause, matches] of CAUSES) if (matches(code, err.message)) return cause;
  return 'other';
}

/** The shared ConnectionProblem (store.ts), with Redis's causes. */
export interface RedisConnectionProblem extends ConnectionProblem {
  readonly cause: RedisCause;
}

export interface RedisReachability {
  /** A connection reported an error (ioredis 'error'). */
  error(conn: string, err: Error): void;
  /** A connection is ready. */
  ready(conn: string): void;
  /** A connection closed. */
  closed(conn: string): void;
  /** Why the request path's connection is down (its last error), or undefined while it is up. */
  problem(): RedisConnectionProblem | undefined;
  /** The request path's or the subscriber's connection is down. */
  down(): boolean;
}

/**
 * Tells an unreachable Redis in Redis's terms. Before any connection has ever been ready, the first
 * failure is logged once, at error level, naming the Redis (`target`, password masked) and the cause;
 * the outage log's per-connection lines follow as before (redis-outage-log.ts). It also keeps what
 * /readyz says (`redis_unreachable` with the cause) and whether the connections themselves are down,
 * so the subscriber heartbeat does not blame the subscriber for an outage (subscriber-heartbeat.ts).
 */
export function createRedisReachability(
  options: { target: string; command: string; subscriber: string },
  deps: { logger: Logger },
): RedisReachability {
  const up = new Set<string>();
  const last = new Map<string, RedisConnectionProblem>();
  let everReady = false;
  let reported = false;
  return {
    error(conn, err) {
      const cause = redisCause(err);
      last.set(conn, { cause, err: err.message });
      if (everReady || reported) return;
      reported = true;
      deps.logger.error(
        { redis: options.target, cause, err: err.message },
        `redis unreachable at ${options.target}: ${REDIS_CAUSE_HINTS[cause]}; not ready until it answers, retrying`,
      );
    },
    ready(conn) {
      everReady = true;
      up.add(conn);
      last.delete(conn);
    },
    closed(conn) {
      up.delete(conn);
    },
    problem() {
      if (up.has(options.command)) return undefined;
      return last.get(options.command);
    },
    down: () => !up.has(options.command) || !up.has(options.subscriber),
  };
}
