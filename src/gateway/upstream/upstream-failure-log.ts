// Tested in test/e2e/upstream-failures.test.ts.
import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import type { UpstreamCause } from '../../observe/metrics.js';

/** How often each cause may be logged while it keeps happening. */
export const UPSTREAM_FAILURE_LOG_INTERVAL_MS = 10_000;

/** What to look at, per cause: the first three are almost always a wrong KEYGATE_UPSTREAM. */
const CHECK: Readonly<Record<UpstreamCause, string>> = Object.freeze({
  dns: 'the host name in KEYGATE_UPSTREAM does not resolve from here',
  refused: 'nothing listens at the host and port of KEYGATE_UPSTREAM',
  unreachable: 'no network route to the host of KEYGATE_UPSTREAM',
  tls: 'TLS failed: the scheme of KEYGATE_UPSTREAM (http:// or https://) or the upstream certificate',
  reset: 'the upstream closed the connection before answering (a plain-HTTP client on a TLS port does this too)',
  timeout: 'the upstream did not connect or answer within KEYGATE_UPSTREAM_TIMEOUT_MS',
  bad_response: 'the upstream answered something that is not HTTP/1.1 (an https:// upstream given as http://?)',
  other: 'see err',
});

export interface UpstreamFailureLog {
  /** One failed exchange. Logged at warn unless this cause was logged less than an interval ago. */
  note(cause: UpstreamCause, err: Error & { code?: string }): void;
}

/**
 * The upstream's failures at warn, without flooding: one line per distinct cause per interval, with
 * the error as Node or undici worded it (`getaddrinfo ENOTFOUND upstream.internal`) and `suppressed`,
 * the failures of that cause since its previous line that were not logged. The count never gets lost:
 * every failure is also on its request line (`upstreamCause`) and in keygate_upstream_errors_total.
 */
export function createUpstreamFailureLog(
  options: { upstream: string; intervalMs?: number },
  deps: { logger: Logger; clock: Clock },
): UpstreamFailureLog {
  const intervalMs = options.intervalMs ?? UPSTREAM_FAILURE_LOG_INTERVAL_MS;
  const last = new Map<UpstreamCause, { at: number; suppressed: number }>();
  return {
    note(cause, err) {
      const now = deps.clock.nowMs();
      const seen = last.get(cause);
      if (seen !== undefined && now - seen.at < intervalMs) {
        seen.suppressed++;
        return;
      }
      deps.logger.warn(
        {
          cause,
          errCode: err.code,
          err: err.message,
          upstream: options.upstream,
          check: CHECK[cause],
          suppressed: seen?.suppressed ?? 0,
          intervalMs,
        },
        'upstream request failed',
      );
      last.set(cause, { at: now, suppressed: 0 });
    },
  };
}
