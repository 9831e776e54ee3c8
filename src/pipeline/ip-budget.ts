import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Denial, ErrorCode } from '../errors.js';
import { budgetPrefix } from '../net/ip-prefix.js';
import type { CompiledLimit } from '../policy/rate-limit-spec.js';
import type { RateState } from '../store/rate-limit.js';
import type { IpBudgetStore } from '../store/store.js';
import type { RateInfo } from './authenticate.js';

/**
 * The failed-authentication budget per client IP (policy `failedAuthLimit`), owned by the request path
 * (gateway/request-path.ts), which walks it in two steps:
 *   - `checkIpBudget`: while the budget is empty, every request from the IP (IPv6: its /64) is refused with
 *     429 `ip_blocked` (`blockedMs`), right after the header count is screened, before the target, route,
 *     upstream head or token are looked at;
 *   - `spendIpBudget`: a refusal of authentication with one of SPENDING_CODES, for a request that presented
 *     a credential (a non-empty Authorization header: any web page can make its visitors' browsers send
 *     requests without one, an <img> or a preflight, and those must not get a visitor's IP blocked), spends 1 from the IP's budget
 *     in the store (`spend`), shared by every instance (Redis: one script on the IP's own slot, Redis's
 *     clock); the refusal is answered once the spend has been made, so the next request, on any instance,
 *     finds it spent. A body found not to match its token's body_sha256 (after the admit) spends too.
 *
 * The check is local, so an admitted request costs no extra round trip: each instance keeps a
 * blocked-until table, fed by its own spends' replies and by the blocks other instances announce
 * (Redis `ip-blocks` channel, heard by the subscriber that hears key changes). An instance that missed
 * an announcement (its subscriber was reconnecting) learns of the block from the next failure it
 * spends for that IP, whose reply says "empty"; until then a valid token from that IP can pass there.
 * The table is bounded (MAX_BLOCKED): past it, entries that expired are dropped, then the oldest.
 */
export const SPENDING_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([40004, 40106, 40107, 10013]);
export const MAX_BLOCKED = 100_000;

/**
 * Whether a refusal of authentication spends from the IP's budget: one of SPENDING_CODES, for a request
 * that presented a credential (a missing or empty Authorization header spends nothing).
 */
export function spendsIpBudget(denial: Denial): boolean {
  return SPENDING_CODES.has(denial.code) && denial.reason !== 'missing_header';
}

/** 429 ip_blocked: no key was looked at, the IP's budget is what the client is told of. */
export type IpBlocked = Denial & { readonly rate: RateInfo };

/**
 * Where an empty IP budget stands `blockedUs` before its next free unit: nothing left, the next failure
 * fits in `blockedUs`, and the whole burst is back (RateLimit `t`, docs/keys.md) (burst - 1) intervals later.
 */
export function blockedState(limit: CompiledLimit, blockedUs: number): RateState {
  return { remaining: 0, resetUs: blockedUs + (limit.burst - 1) * limit.intervalUs, retryAfterUs: blockedUs };
}

export interface IpBudget {
  /** How long `ip` is still blocked on this instance, in ms (0: not blocked). */
  blockedMs(ip: string): number;
  /**
   * Spends 1 from `ip`'s budget under `limit`: resolves once spent (never rejects: a spend the store could
   * not make is logged, and the refusal it was for stands).
   */
  spend(ip: string, limit: CompiledLimit): Promise<void>;
  close(): void;
}

export function createIpBudget(deps: {
  readonly store: IpBudgetStore;
  readonly clock: Clock;
  readonly logger: Logger;
}): IpBudget {
  const blockedUntil = new Map<string, number>(); // budgetPrefix(ip) -> until (ms, this instance's clock)

  function block(key: string, blockedUs: number) {
    const until = deps.clock.nowMs() + Math.ceil(blockedUs / 1_000);
    if (blockedUntil.size >= MAX_BLOCKED && !blockedUntil.has(key)) {
      const now = deps.clock.nowMs();
      for (const [k, u] of blockedUntil) if (u <= now) blockedUntil.delete(k);
      if (blockedUntil.size >= MAX_BLOCKED) blockedUntil.delete(blockedUntil.keys().next().value as string);
    }
    if ((blockedUntil.get(key) ?? 0) < until) blockedUntil.set(key, until);
  }
  const stopListening = deps.store.onIpBlocked?.(block) ?? (() => {});

  function remainingMs(key: string): number {
    const until = blockedUntil.get(key);
    if (until === undefined) return 0;
    const left = until - deps.clock.nowMs();
    if (left > 0) return left;
    blockedUntil.delete(key);
    return 0;
  }

  async function spend(ip: string, limit: CompiledLimit) {
    const key = budgetPrefix(ip);
    try {
      const blockedUs = await deps.store.spendFailedAuth(key, limit);
      if (blockedUs > 0) block(key, blockedUs);
    } catch (err) {
      // The refusal stands whatever happened to the spend; a store that is down cannot share it anyway.
      deps.logger.warn({ err: (err as Error).message }, 'failed-authentication budget not spent');
    }
  }

  return { blockedMs: (ip) => remainingMs(budgetPrefix(ip)), spend, close: stopListening };
}
