import type { Logger } from 'pino';
import { ERRORS } from '../errors.js';

/** How often a blocked client IP's refusals are summed up in one line while they keep coming. */
export const BLOCKED_LOG_INTERVAL_MS = 10_000;
/** Client IPs summed up at once at most; past it a refusal gets its own request line (never uncounted). */
export const MAX_SUMMARISED_IPS = 10_000;

export interface BlockedRequestLog {
  /**
   * One request from `ip` (its budget name: an IPv4 address or an IPv6 /64) refused `ip_blocked`.
   * True: the first of a run, written as its own request line. False: counted for the IP's next summary line.
   */
  note(ip: string): boolean;
  /** Writes every count not yet written (at shutdown, once the last response has closed). */
  flush(): void;
}

/**
 * The request lines of a blocked client IP, so that a flood of forged tokens is not a log
 * flood too: the first refusal of a run is logged in full (its request line), the rest are summed up,
 * one `blocked requests` line per IP per interval with `refused` (how many were not logged one by one
 * since the IP's previous line). An interval with no refusal from the IP ends its run: the next one is
 * logged in full again. Every refusal is still counted in keygate_auth_rejections_total{reason="ip_blocked"}
 * and keygate_requests_total, so the request lines plus the summaries' `refused` account for each one.
 */
export function createBlockedRequestLog(
  options: { readonly intervalMs?: number; readonly maxIps?: number },
  deps: { readonly logger: Logger },
): BlockedRequestLog {
  const intervalMs = options.intervalMs ?? BLOCKED_LOG_INTERVAL_MS;
  const maxIps = options.maxIps ?? MAX_SUMMARISED_IPS;
  const runs = new Map<string, { refused: number }>(); // budget name -> refusals not yet written
  let timer: NodeJS.Timeout | undefined;

  function write(ip: string, refused: number) {
    deps.logger.info(
      { clientIp: ip, code: 10429, reason: 'ip_blocked', status: ERRORS[10429].status, refused, intervalMs },
      'blocked requests',
    );
  }

  /** Each interval: a line per IP refused since the last one; an IP with none has ended its run. */
  function sweep() {
    for (const [ip, run] of runs) {
      if (run.refused === 0) runs.delete(ip);
      else {
        write(ip, run.refused);
        run.refused = 0;
      }
    }
    if (runs.size === 0 && timer !== undefined) {
      clearInterval(timer);
      timer = undefined;
    }
  }

  return {
    note(ip) {
      const run = runs.get(ip);
      if (run !== undefined) {
        run.refused++;
        return false;
      }
      if (runs.size >= maxIps) return true;
      runs.set(ip, { refused: 0 });
      timer ??= setInterval(sweep, intervalMs).unref();
      return true;
    },
    flush() {
      for (const [ip, run] of runs) if (run.refused > 0) write(ip, run.refused);
      runs.clear();
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
    },
  };
}
