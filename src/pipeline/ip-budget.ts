import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { deny, type ErrorCode } from '../errors.js';
import { budgetPrefix } from '../net/ip-prefix.js';
import type { CompiledLimit } from '../policy/rate-limit-spec.js';
import type { Store } from '../store/store.js';
import type { Authenticator, IpBlocked, RateInfo } from './authenticate.js';

/**
 * The failed-authentication budget per client IP (issue 42, policy `failedAuthLimit`), around the
 * authenticator:
 *   - a refusal with one of SPENDING_CODES spends 1 from the IP's budget (IPv6: its /64) in the store,
 *     shared by every instance (Redis: one script on the IP's own slot, Redis's clock); the refusal is
 *     answered once the spend has been made, so the next request, on any instance, finds it spent;
 *   - while the budget is empty, every request from the IP is refused with 429 `ip_blocked`: by the request
 *     path's `checkIpBudget` step (gateway/request-path.ts, through `blockedMs`), right after the header
 *     count is screened, before the target, route, upstream head or token are looked at. `authenticate`
 *     checks again before anything of authentication (no token parse, no key read, no signature), for a
 *     caller that reaches it without that step.
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

export interface IpBudget {
  /** How long `ip` is still blocked on this instance, in ms (0: not blocked). */
  blockedMs(ip: string): number;
  /**
   * Spends 1 for a refusal found after authentication (a bound body that does not match its token's
   * body_sha256, issue 43): resolves once spent, so the refusal is answered after it as the others are.
   */
  spendAfterAdmit(ip: string): Promise<void>;
  readonly authenticate: Authenticator;
  close(): void;
}

export function createIpBudget(
  options: { readonly limit: () => CompiledLimit | undefined },
  deps: { readonly inner: Authenticator; readonly store: Store; readonly clock: Clock; readonly logger: Logger },
): IpBudget {
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

  async function spend(key: string, limit: CompiledLimit) {
    try {
      const blockedUs = await deps.store.spendFailedAuth(key, limit);
      if (blockedUs > 0) block(key, blockedUs);
    } catch (err) {
      // The refusal stands whatever happened to the spend; a store that is down cannot share it anyway.
      deps.logger.warn({ err: (err as Error).message }, 'failed-authentication budget not spent');
    }
  }

  const authenticate: Authenticator = (rawHeaders, request) => {
    const limit = options.limit();
    const ip = request?.ip;
    // Off (the default) or no IP: the inner authenticator's own promise, with no async frame around it
    // (an async function returning a promise costs one more promise and three microtask hops per request).
    if (limit === undefined || ip === undefined) return deps.inner(rawHeaders, request);
    return withBudget(rawHeaders, request, limit, ip);
  };

  async function withBudget(
    rawHeaders: readonly string[],
    request: Parameters<Authenticator>[1],
    limit: CompiledLimit,
    ip: string,
  ): ReturnType<Authenticator> {
    const key = budgetPrefix(ip);
    const left = remainingMs(key);
    if (left > 0) {
      const us = left * 1_000;
      const rate: RateInfo = { limits: [limit], states: [{ remaining: 0, resetUs: us, retryAfterUs: us }] };
      return { ...deny('ip_blocked'), rate } satisfies IpBlocked;
    }
    const verdict = await deps.inner(rawHeaders, request);
    if (!verdict.ok && SPENDING_CODES.has(verdict.code)) await spend(key, limit);
    return verdict;
  }

  return {
    blockedMs: (ip) => remainingMs(budgetPrefix(ip)),
    spendAfterAdmit(ip) {
      const limit = options.limit();
      return limit === undefined ? Promise.resolve() : spend(budgetPrefix(ip), limit);
    },
    authenticate,
    close: stopListening,
  };
}
